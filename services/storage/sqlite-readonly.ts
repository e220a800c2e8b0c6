import Database from "better-sqlite3";

/**
 * Opens an existing SQLite file for reading only.
 *
 * With `queryOnly` false: a read-only connection (`SQLITE_OPEN_READONLY`).
 * On a WAL file it creates the `-wal` and `-shm` files when they are
 * missing, and never removes them: only a connection that may write
 * checkpoints and cleans up at close.
 *
 * With `queryOnly` true: a read-write connection with `PRAGMA query_only`,
 * which refuses every write (`SQLITE_READONLY`). When it is the last
 * connection to the file to close, SQLite checkpoints and removes the
 * `-wal` and `-shm` files, as it does for a server stopped cleanly; while
 * another process (a live server) has the file open it leaves them to that
 * process, under SQLite's own locking, so this is safe on a live file. That
 * last close may move the content of a WAL left by a crashed writer into
 * the main file (the records are the same). A file this process may not
 * write (permissions, read-only file system) is opened read-only by SQLite
 * itself. Used for a database read as a whole: a `copy` source (a backup
 * file used as `--from` is left as it was, issue 14) and `stats`.
 *
 * @param timeoutMs busy timeout in milliseconds (better-sqlite3's `timeout`); undefined keeps its default.
 * @throws SqliteError when the file does not exist or cannot be opened.
 */
export function openReadOnly(path: string, queryOnly: boolean, timeoutMs?: number): Database.Database {
  const timeout = timeoutMs === undefined ? {} : { timeout: timeoutMs };
  if (!queryOnly) return new Database(path, { readonly: true, fileMustExist: true, ...timeout });
  const db = new Database(path, { fileMustExist: true, ...timeout });
  db.pragma("query_only = ON");
  return db;
}
