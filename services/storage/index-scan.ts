import { createHash } from "node:crypto";

/**
 * Reading a store index in bounded pages (issue 10): List, ListSchedules,
 * DueSchedules and ListFires never hold more of the store than one page plus
 * the answer being built. Each index is read in a total order of its key
 * (keyset paging: every page starts strictly after the previous page's last
 * key), so an entry present for the whole scan is read, and one page costs
 * the same wherever it starts. Because every scan is ordered by a key, the
 * scans of N partitions of one index (Redis Cluster, issue 13) merge into one
 * by a k-way merge on that key.
 */

/** Most entries one page holds (SQLite `LIMIT`, Redis `ZRANGE ... LIMIT`). */
export const SCAN_PAGE_ENTRIES = 256;

/**
 * Payload bytes after which a page ends early (SQLite reads and Redis
 * batches of loaded records); a page always holds at least one entry, so a
 * page is at most this plus one record.
 */
export const SCAN_PAGE_BYTES = 1024 * 1024;

/**
 * One page of an index: its entries in key order, and the key to read the
 * next page after, or `undefined` when the index holds nothing further.
 */
export interface Page<E, K> {
  entries: E[];
  next: K | undefined;
}

/**
 * Entries of one store index, read lazily page by page, plus a cheap count
 * of what the index holds (for the message of a refused answer).
 */
export interface IndexScan<E> extends AsyncIterable<E> {
  /** How many entries the index holds now (SQLite `COUNT(*)` over an index, Redis `ZCARD`). */
  total(): Promise<number>;
}

/**
 * Iterates an index page by page, yielding each page's entries:
 * `readPage(undefined)` reads the first page, `readPage(k)` the page after
 * key `k`. Stops when a page says there is no next key. Breaking out of the
 * loop reads no further page.
 */
export async function* keysetPages<E, K>(readPage: (after: K | undefined) => Promise<Page<E, K>>): AsyncGenerator<E[], void, undefined> {
  let after: K | undefined;
  do {
    const page = await readPage(after);
    yield page.entries;
    after = page.next;
  } while (after !== undefined);
}

/** Like {@link keysetPages}, one entry at a time. */
export async function* keysetScan<E, K>(readPage: (after: K | undefined) => Promise<Page<E, K>>): AsyncGenerator<E, void, undefined> {
  for await (const entries of keysetPages(readPage)) yield* entries;
}

/**
 * Cuts a page out of `rows` (already limited to {@link SCAN_PAGE_ENTRIES}
 * by the query): takes rows until they hold {@link SCAN_PAGE_BYTES} by
 * `bytesOf`, at least one. The next key is the last row's when the page is
 * full (by count or bytes), `undefined` when `rows` ran out first.
 */
export function takePage<R, E, K>(rows: Iterable<R>, map: (row: R) => E, bytesOf: (row: R) => number, keyOf: (row: R) => K): Page<E, K> {
  const entries: E[] = [];
  let bytes = 0;
  let last: R | undefined;
  for (const row of rows) {
    entries.push(map(row));
    last = row;
    bytes += bytesOf(row);
    if (bytes >= SCAN_PAGE_BYTES) break;
  }
  const full = entries.length >= SCAN_PAGE_ENTRIES || bytes >= SCAN_PAGE_BYTES;
  return { entries, next: full && last !== undefined ? keyOf(last) : undefined };
}

/**
 * Splits `items` into consecutive batches of about {@link SCAN_PAGE_BYTES}
 * by `sizes` (same order), each holding at least one item, so records whose
 * size is known before they are loaded (Redis `HSTRLEN`) are loaded a
 * bounded amount at a time.
 */
export function batchesBySize<T>(items: readonly T[], sizes: readonly number[]): T[][] {
  const batches: T[][] = [];
  let batch: T[] = [];
  let bytes = 0;
  items.forEach((item, i) => {
    if (batch.length > 0 && bytes + sizes[i]! > SCAN_PAGE_BYTES) {
      batches.push(batch);
      batch = [];
      bytes = 0;
    }
    batch.push(item);
    bytes += sizes[i]!;
  });
  if (batch.length > 0) batches.push(batch);
  return batches;
}

/** Keys longer than this many characters are remembered by digest in {@link distinctBy}. */
const LONG_KEY_CHARS = 1024;

/**
 * Drops entries whose key was already yielded. A scan ordered by a value
 * that changes on write (save time, next fire time) can meet an entry twice
 * when it is rewritten ahead of the scan; the first sighting is kept. Holds
 * one key per entry yielded, like the answer it feeds.
 *
 * V8 hashes a string longer than 16,383 characters by its length alone, so a
 * set of long ids of one length degrades into a linear search of 16 KiB
 * comparisons (4,100 ids of 16 KiB took 80 s); long keys are therefore kept
 * as SHA-256 digests, in a set of their own.
 */
export async function* distinctBy<E>(entries: AsyncIterable<E>, keyOf: (entry: E) => string): AsyncGenerator<E, void, undefined> {
  const seen = new Set<string>();
  const seenLong = new Set<string>();
  for await (const e of entries) {
    const k = keyOf(e);
    const [set, key] = k.length > LONG_KEY_CHARS ? [seenLong, createHash("sha256").update(k).digest("base64")] : [seen, k];
    if (set.has(key)) continue;
    set.add(key);
    yield e;
  }
}

/** Applies `fn` to each entry of `entries`, lazily. */
export async function* mapEntries<E, T>(entries: AsyncIterable<E>, fn: (entry: E) => T): AsyncGenerator<T, void, undefined> {
  for await (const e of entries) yield fn(e);
}

/** An {@link IndexScan} over `entries`, counted by `total`. */
export function indexScan<E>(entries: () => AsyncIterable<E>, total: () => Promise<number>): IndexScan<E> {
  return { [Symbol.asyncIterator]: () => entries()[Symbol.asyncIterator](), total };
}
