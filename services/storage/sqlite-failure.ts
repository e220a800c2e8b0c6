import { StoreFailure } from "./store-failure.js";

/** What {@link sqliteFailure} needs to know about the operation that failed. */
export interface SqliteFailureContext {
  /** True for an operation that writes (decides `outcome_unknown` vs `unreachable` on a timeout). */
  write: boolean;
  /** Milliseconds a write waits for another process's lock (`busy_timeout`). */
  busyTimeoutMs: number;
  /** Milliseconds one operation may take (`--store-timeout`). */
  storeTimeoutMs: number;
}

/** How failure messages name the store; never a path or a payload. */
const WHERE = "the SQLite database";

/**
 * Error code the SQLite worker gives a request it dropped unstarted because
 * its deadline (`--store-timeout`) had passed while it was queued; nothing of
 * it ran.
 */
export const EXPIRED_CODE = "MECATL_EXPIRED";

/**
 * Error code of a write that publishes a staged snapshot (issue 11,
 * session-store/sqlite-blobs.ts) when the staged chunks are gone or not
 * whole: nothing was written.
 */
export const STAGE_LOST_CODE = "MECATL_STAGE_LOST";

/**
 * Classifies an error the SQLite worker reported for one operation (issue 9).
 * `code` is better-sqlite3's extended result code name (`SQLITE_FULL`,
 * `SQLITE_IOERR_FSYNC`, ...), a Node.js errno name (`ENOSPC`), or
 * {@link EXPIRED_CODE}. Every failed operation was rolled back, so every
 * failure says that nothing was written.
 *
 * - `SQLITE_FULL`, `SQLITE_IOERR_SHMSIZE`, `ENOSPC` → `disk_full`
 *   (RESOURCE_EXHAUSTED), `SQLITE_NOMEM` → `disk_full` (out of memory);
 * - `SQLITE_IOERR*`, `SQLITE_CORRUPT*`, `SQLITE_NOTADB`, `SQLITE_READONLY*`,
 *   `SQLITE_CANTOPEN*`, `SQLITE_PROTOCOL`, `EIO` → `io_error` (UNAVAILABLE);
 * - `SQLITE_BUSY*`, `SQLITE_LOCKED*` (after the busy timeout),
 *   {@link EXPIRED_CODE} and {@link STAGE_LOST_CODE} (a staged snapshot removed
 *   before its Save published it) → `unreachable` (UNAVAILABLE).
 *
 * @returns the StoreFailure, or undefined when the error is not an
 *   infrastructure condition (a constraint or logic error: a bug, INTERNAL).
 */
export function sqliteFailure(code: string | undefined, message: string, context: SqliteFailureContext): StoreFailure | undefined {
  if (code === undefined) return undefined;
  const where = WHERE;
  const cause = { cause: new Error(`${code}: ${message}`) };
  // SQLite grows its -shm file by writing to it; on a full disk that fails as SQLITE_IOERR_SHMSIZE.
  if (code === "SQLITE_FULL" || code === "ENOSPC" || code === "SQLITE_IOERR_SHMSIZE") {
    return new StoreFailure("disk_full", `the disk holding ${where} is full (${message}); nothing was written`, cause);
  }
  if (code.startsWith("SQLITE_NOMEM")) {
    return new StoreFailure("disk_full", `${where} ran out of memory (${message}); nothing was written`, cause);
  }
  if (code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED")) {
    return new StoreFailure("unreachable", `${where} stayed locked by another connection for more than ${context.busyTimeoutMs} ms (${message}); nothing was written`, cause);
  }
  if (code.startsWith("SQLITE_READONLY")) {
    return new StoreFailure("io_error", `${where} cannot be written: it is read-only (${message}); check the file's permissions and mount; nothing was written`, cause);
  }
  if (code.startsWith("SQLITE_CANTOPEN")) {
    return new StoreFailure("io_error", `${where} cannot open one of its files (${message}); check the directory; nothing was written`, cause);
  }
  if (code.startsWith("SQLITE_IOERR") || code === "EIO" || code === "SQLITE_PROTOCOL") {
    return new StoreFailure("io_error", `${where} failed to read or write its files (${message}); nothing was written`, cause);
  }
  if (code.startsWith("SQLITE_CORRUPT") || code === "SQLITE_NOTADB") {
    return new StoreFailure("io_error", `${where} is damaged (${message}); nothing was written`, cause);
  }
  if (code === STAGE_LOST_CODE) {
    return new StoreFailure("unreachable", `${where} lost the snapshot staged for this Save (${message}); nothing was written`, cause);
  }
  if (code === EXPIRED_CODE) {
    return new StoreFailure("unreachable", `${where} did not start the operation within ${context.storeTimeoutMs} ms (--store-timeout); nothing was written`, cause);
  }
  return undefined;
}

/**
 * The failure for an operation the SQLite worker has not answered within
 * `--store-timeout`: a write it had started may still commit after the
 * caller gave up (`outcome_unknown`; one not started is cancelled instead and
 * fails with {@link EXPIRED_CODE}'s "nothing was written",
 * sqlite-write-claims.ts), a read changed nothing (`unreachable`). Both are
 * UNAVAILABLE (issue 9).
 */
export function sqliteTimeout(context: SqliteFailureContext): StoreFailure {
  return context.write
    ? new StoreFailure("outcome_unknown", `${WHERE} did not finish the write within ${context.storeTimeoutMs} ms (--store-timeout); it may still be committed`)
    : new StoreFailure("unreachable", `${WHERE} did not answer within ${context.storeTimeoutMs} ms (--store-timeout)`);
}
