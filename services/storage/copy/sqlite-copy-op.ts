import type Database from "better-sqlite3";
import { readOp, type SqliteOp } from "../sqlite-op.js";

/**
 * A copy `ids` operation on the SQLite worker (issue 14,
 * services/storage/copy/kind-store.ts): the first column of every row `sql`
 * selects, as strings.
 */
export function idsOp(sql: string): SqliteOp<Record<string, never>, string[]> {
  return readOp((db) => db.prepare(sql).pluck().all() as string[]);
}

const statements = new WeakMap<Database.Database, Map<string, Database.Statement>>();

/** The statement for `sql` on `db`, prepared once per connection: a copy runs each of its statements hundreds of thousands of times. */
export function copyStatement<P extends unknown[] | {} = unknown[], R = unknown>(db: Database.Database, sql: string): Database.Statement<P, R> {
  let cache = statements.get(db);
  if (cache === undefined) statements.set(db, (cache = new Map()));
  let s = cache.get(sql);
  if (s === undefined) cache.set(sql, (s = db.prepare(sql)));
  return s as unknown as Database.Statement<P, R>;
}
