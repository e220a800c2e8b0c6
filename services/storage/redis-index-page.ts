import type { RedisClient } from "./redis-client.js";
import { compareIdBytes } from "../../common/byte-order.js";
import { batchesBySize, keysetPages, SCAN_PAGE_BYTES, SCAN_PAGE_ENTRIES, type Page } from "./index-scan.js";
import { redisScript, runScript, type RedisScript } from "./redis-script.js";

/**
 * How the index readers reach Redis: one read request, or one read-only
 * script. {@link redisReader} sends each once on a client; a store whose
 * reads are bounded and retried can pass its own implementation instead.
 */
export interface RedisReader {
  read<T>(request: (redis: RedisClient) => Promise<T>): Promise<T>;
  readScript(script: RedisScript, keys: string[], args: Array<string | number>): Promise<unknown>;
}

/** A {@link RedisReader} that sends each request once on `redis`. */
export function redisReader(redis: RedisClient): RedisReader {
  return {
    read: (request) => request(redis),
    readScript: (script, keys, args) => runScript(redis, script, keys, args),
  };
}

/**
 * One page of a sorted set in (score, member) order, strictly after a
 * cursor entry, found by position inside one script so the page is exact
 * even while writers move entries. Redis orders members of equal score by
 * their bytes; the script finds the cursor among them by binary search with a
 * byte-wise comparison (Lua's `<` follows the server's locale).
 *
 * KEYS[1] the sorted set.
 * ARGV[1] the cursor's score (`-inf` to start), ARGV[2] its member (empty to
 *         start), ARGV[3] how many entries to return.
 * Returns up to ARGV[3] entries after the cursor, flat: member, score, ...
 */
const SCORE_INDEX_PAGE = redisScript({
  name: "mecatlScoreIndexPage",
  readOnly: true,
  lua: `
local key, m = KEYS[1], ARGV[2]
local function after(x)
  for i = 1, math.min(#x, #m) do
    local a, b = string.byte(x, i), string.byte(m, i)
    if a ~= b then return a > b end
  end
  return #x > #m
end
local lo = redis.call('ZCOUNT', key, '-inf', '(' .. ARGV[1])
local hi = redis.call('ZCOUNT', key, '-inf', ARGV[1])
while lo < hi do
  local mid = math.floor((lo + hi) / 2)
  if after(redis.call('ZRANGE', key, mid, mid)[1]) then hi = mid else lo = mid + 1 end
end
return redis.call('ZRANGE', key, lo, lo + tonumber(ARGV[3]) - 1, 'WITHSCORES')
`,
});

/** An entry of a sorted set; `score` as Redis prints it (integers exactly). */
export interface ScoredMember {
  member: string;
  score: string;
}

/**
 * Reads the sorted set `key` in (score, member) order, yielding pages of up
 * to {@link SCAN_PAGE_ENTRIES} entries, up to and including `maxScore`.
 * An entry whose score grows during the scan (a rewrite) can be read twice;
 * callers drop repeats (index-scan.ts `distinctBy`).
 */
export function scoreIndexPages(redis: RedisReader, key: string, maxScore = Infinity): AsyncGenerator<ScoredMember[], void, undefined> {
  return keysetPages(async (after: ScoredMember | undefined): Promise<Page<ScoredMember, ScoredMember>> => {
    const flat = (await redis.readScript(SCORE_INDEX_PAGE, [key], [after?.score ?? "-inf", after?.member ?? "", SCAN_PAGE_ENTRIES])) as string[];
    const entries: ScoredMember[] = [];
    for (let i = 0; i + 1 < flat.length; i += 2) {
      if (Number(flat[i + 1]) > maxScore) return { entries, next: undefined };
      entries.push({ member: flat[i]!, score: flat[i + 1]! });
    }
    return { entries, next: entries.length === SCAN_PAGE_ENTRIES ? entries.at(-1) : undefined };
  });
}

/**
 * Reads the members of the sorted set `key`, whose scores are all 0, that
 * start with `prefix` (every member when empty), in byte order
 * (`ZRANGE BYLEX`), with the prefix removed, yielding pages of up to
 * {@link SCAN_PAGE_ENTRIES}. Each member present for the whole scan is read
 * exactly once.
 */
export function lexIndexPages(redis: RedisReader, key: string, prefix = ""): AsyncGenerator<string[], void, undefined> {
  const end = prefix === "" ? "+" : Buffer.concat([Buffer.from(`[${prefix}`, "utf8"), Buffer.of(0xff)]);
  return keysetPages(async (after: string | undefined): Promise<Page<string, string>> => {
    const start = after === undefined ? (prefix === "" ? "-" : `[${prefix}`) : `(${prefix}${after}`;
    const members = await redis.read((r) => r.zrange(key, start, end, "BYLEX", "LIMIT", 0, SCAN_PAGE_ENTRIES));
    const entries = members.map((m) => m.slice(prefix.length));
    return { entries, next: members.length === SCAN_PAGE_ENTRIES ? entries.at(-1) : undefined };
  });
}

/**
 * Loads the records named by one index page, a batch of about
 * {@link SCAN_PAGE_BYTES} at a time: first the length of each record's
 * largest field (`HSTRLEN key sizeField`, pipelined), then `load` for each
 * record of a batch, concurrently. A page of large records is thus never
 * held whole. Records `load` finds gone are skipped.
 *
 * @param ids the page's members, in index order; records are yielded in the same order.
 * @param keyOf the hash holding the record of an id.
 */
export async function* loadInBatches<T>(redis: RedisReader, ids: readonly string[], keyOf: (id: string) => string, sizeField: string, load: (id: string) => Promise<T | undefined>): AsyncGenerator<T, void, undefined> {
  const sizes = await redis.read((r) => Promise.all(ids.map((id) => r.hstrlen(keyOf(id), sizeField))));
  for (const batch of batchesBySize(ids, sizes)) {
    for (const record of await Promise.all(batch.map(load))) if (record !== undefined) yield record;
  }
}

/**
 * Merges N sorted sequences into one (k-way merge, issue 13): the index
 * partitions of a Redis store, each read lazily page by page. The first
 * entry of every source is awaited together, then each step yields the
 * smallest head by `compare` and advances only its source, so the merge
 * reads no further into any partition than its output has reached, plus one
 * page. Breaking out of the loop closes every source.
 */
export async function* mergeSorted<E>(sources: ReadonlyArray<AsyncIterable<E>>, compare: (a: E, b: E) => number): AsyncGenerator<E, void, undefined> {
  const its = sources.map((s) => s[Symbol.asyncIterator]());
  const heads = await Promise.all(its.map((it) => it.next()));
  try {
    for (;;) {
      let best = -1;
      for (let i = 0; i < heads.length; i++) {
        if (heads[i]!.done !== true && (best < 0 || compare(heads[i]!.value as E, heads[best]!.value as E) < 0)) best = i;
      }
      if (best < 0) return;
      yield heads[best]!.value as E;
      heads[best] = await its[best]!.next();
    }
  } finally {
    await Promise.all(its.map((it, i) => (heads[i]!.done === true ? undefined : it.return?.())));
  }
}

/** Flattens a source of pages into its entries. */
async function* entriesOf<E>(pages: AsyncIterable<E[]>): AsyncGenerator<E, void, undefined> {
  for await (const page of pages) yield* page;
}

/** (score, member) order of sorted-set entries: scores numerically, then members byte-wise, as Redis orders them. */
export function compareScored(a: ScoredMember, b: ScoredMember): number {
  return Number(a.score) - Number(b.score) || compareIdBytes(a.member, b.member);
}

/**
 * The entries of N sorted-set partitions in (score, member) order, up to
 * and including `maxScore`: {@link scoreIndexPages} of each, merged.
 */
export function mergedScoreIndex(redis: RedisReader, keys: readonly string[], maxScore = Infinity): AsyncGenerator<ScoredMember, void, undefined> {
  return mergeSorted(keys.map((k) => entriesOf(scoreIndexPages(redis, k, maxScore))), compareScored);
}

/**
 * The members of N sorted-set partitions whose scores are all 0 and whose
 * members start with `prefix`, in byte order, with the prefix removed:
 * {@link lexIndexPages} of each, merged.
 */
export function mergedLexIndex(redis: RedisReader, keys: readonly string[], prefix = ""): AsyncGenerator<string, void, undefined> {
  return mergeSorted(keys.map((k) => entriesOf(lexIndexPages(redis, k, prefix))), compareIdBytes);
}
