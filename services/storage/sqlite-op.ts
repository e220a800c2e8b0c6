import type Database from "better-sqlite3";

/**
 * What an operation can do besides touching the database while it runs inside
 * the SQLite worker: report a change for followers. Notifications are posted to
 * the main thread only after the transaction that produced them commits, so a
 * follower is never woken for a write that might still roll back.
 */
export interface OpContext {
  /** Queues `data` under `topic` for delivery after commit. */
  notify(topic: string, data: unknown): void;
}

/**
 * One named SQLite operation, run on the worker thread that owns the
 * connection. `write` operations run inside the shared group-commit
 * transaction, each under its own savepoint, and are answered only after
 * COMMIT returns (so OK means durable, docs/DESIGN.md principle 1). `read`
 * operations see every committed write.
 *
 * Arguments and results cross a thread boundary by structured clone: plain
 * objects, strings, numbers, bigints, Uint8Arrays.
 */
export interface SqliteOp<A, R> {
  readonly kind: "read" | "write";
  run(db: Database.Database, args: A, ctx: OpContext): R;
}

/** A table of named operations contributed by one service's SQLite store. */
export type OpTable = Record<string, SqliteOp<any, any>>;

/** Declares a read operation (no transaction of its own, never blocks writers). */
export function readOp<A, R>(run: (db: Database.Database, args: A, ctx: OpContext) => R): SqliteOp<A, R> {
  return { kind: "read", run };
}

/** Declares a write operation (group-committed, durable before it answers). */
export function writeOp<A, R>(run: (db: Database.Database, args: A, ctx: OpContext) => R): SqliteOp<A, R> {
  return { kind: "write", run };
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
