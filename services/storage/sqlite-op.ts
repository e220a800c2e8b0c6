import type Database from "better-sqlite3";

/**
 * What an operation knows and can do besides touching the database: report a
 * change for followers, and how many payload bytes a read may load where it
 * runs. Notifications are posted to the main thread only after the
 * transaction that produced them commits, so a follower is never woken for a
 * write that might still roll back.
 */
export interface OpContext {
  /** Queues `data` under `topic` for delivery after commit. */
  notify(topic: string, data: unknown): void;
  /**
   * Payload bytes a read may load where it runs: {@link INLINE_READ_BYTES} on
   * the main thread's connection, {@link UNLIMITED_READ_BYTES} in a worker. An
   * inline read that finds more throws {@link NeedsWorker}.
   */
  readonly readBytes: number;
}

/**
 * Payload bytes an inline read may load on the main thread (1 MiB, about a
 * millisecond of copying): a Load of a larger snapshot or a ReadAfter record
 * above it is read by the reader worker instead, so that large reads never
 * hold up the event loop (issue 11).
 */
export const INLINE_READ_BYTES = 1024 * 1024;

/** {@link OpContext.readBytes} in a worker: no limit (bound as an SQL integer). */
export const UNLIMITED_READ_BYTES = Number.MAX_SAFE_INTEGER;

/**
 * Thrown by an inline read that found a row larger than
 * {@link OpContext.readBytes}: nothing was returned, and the caller runs the
 * same read again on the reader worker.
 */
export class NeedsWorker extends Error {
  constructor() {
    super("the row is too large to read on the main thread");
  }
}

/**
 * One named SQLite operation, run on the worker thread that owns the
 * connection. `write` operations run inside the shared group-commit
 * transaction, each under its own savepoint, and are answered only after
 * COMMIT returns (so OK means durable, docs/DESIGN.md principle 1). `read`
 * operations run on the reader worker's read-only connection and see every
 * write answered before they were called (WAL: a new read transaction sees
 * every commit). An `inline` read is a point read that runs on the main
 * thread's read-only connection, waiting neither for a worker nor behind any
 * write (issue 11); it loads at most `ctx.readBytes` of payload and throws
 * {@link NeedsWorker} for more. With `sqlite::memory:` (one connection) every
 * operation runs on the writer worker.
 *
 * Arguments and results cross a thread boundary by structured clone (plain
 * objects, strings, numbers, bigints, Uint8Arrays); a Uint8Array of 64 KiB or
 * more that owns its whole memory is moved instead of copied (sqlite-transfer.ts).
 */
export interface SqliteOp<A, R> {
  readonly kind: "read" | "write";
  /** For a read: whether it may run on the main thread (see above). */
  readonly inline: boolean;
  /**
   * For a write that moves a lot of data (a staged chunk, the drop of a
   * garbage chunk): committed after the small writes queued with it, in a
   * transaction of its own, so that they never wait for its insert (issue
   * 11). It is synced by its own commit like any other (`synchronous =
   * FULL`): until 2026-12-03 these commits ran at `synchronous = NORMAL`,
   * and the next small write's commit then synced their frames, so a Renew
   * beside a loop of 64 MiB Saves waited for the chunks' bytes to reach the
   * disk (Renew p99 40–61 ms against 22–37 ms with each chunk synced by its
   * own commit, five interleaved probe runs each, bench/RESULTS.md).
   */
  readonly large?: boolean;
  run(db: Database.Database, args: A, ctx: OpContext): R;
}

/** A table of named operations contributed by one service's SQLite store. */
export type OpTable = Record<string, SqliteOp<any, any>>;

/** Declares a read operation (reader worker; no transaction of its own, never blocks writers). */
export function readOp<A, R>(run: (db: Database.Database, args: A, ctx: OpContext) => R): SqliteOp<A, R> {
  return { kind: "read", inline: false, run };
}

/**
 * Declares a point read that may run on the main thread: it reads a few rows
 * by key, loads at most `ctx.readBytes` of payload, and throws
 * {@link NeedsWorker} when the row holds more (see {@link fitting}).
 */
export function inlineReadOp<A, R>(run: (db: Database.Database, args: A, ctx: OpContext) => R): SqliteOp<A, R> {
  return { kind: "read", inline: true, run };
}

/** Declares a write operation (group-committed, durable before it answers). */
export function writeOp<A, R>(run: (db: Database.Database, args: A, ctx: OpContext) => R): SqliteOp<A, R> {
  return { kind: "write", inline: false, run };
}

/** Declares a large write (see {@link SqliteOp.large}): group-committed with other large writes only. */
export function largeWriteOp<A, R>(run: (db: Database.Database, args: A, ctx: OpContext) => R): SqliteOp<A, R> {
  return { kind: "write", inline: false, large: true, run };
}

/**
 * The pattern of an inline point read: `row` is the row selected with a size
 * condition in its WHERE clause (so that SQLite never loads a row that does
 * not fit), and `exists` asks whether the row is there at all. Returns the
 * row, or undefined when there is none.
 *
 * @throws NeedsWorker when the row exists but did not fit.
 */
export function fitting<R>(row: R | undefined, exists: () => boolean): R | undefined {
  if (row !== undefined) return row;
  if (exists()) throw new NeedsWorker();
  return undefined;
}

/**
 * A schema migration for one component. Versions are numbered from 1 per
 * component and applied in order, once, inside one transaction each; the
 * applied version is kept in the `schema_migrations` table. `sql` runs
 * first, then `run` (for a migration that must rewrite data with code, e.g.
 * deriving new rows from stored payloads), in the same transaction.
 */
export interface Migration {
  readonly component: string;
  readonly version: number;
  readonly sql: string;
  readonly run?: (db: Database.Database) => void;
}
