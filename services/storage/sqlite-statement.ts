import type Database from "better-sqlite3";

const statements = new WeakMap<Database.Database, Map<string, Database.Statement>>();

/**
 * The prepared statement for `sql` on `db`, prepared once per connection and
 * kept as long as the connection lives: the hot paths run thousands of
 * statements a second, and preparing one costs about as much as running it
 * (issue 11). Each connection (writer worker, reader worker, main thread) has
 * its own statements.
 *
 * @throws SQLite's error when `sql` does not compile (a bug).
 */
export function statement<P extends unknown[] | {} = unknown[], R = unknown>(db: Database.Database, sql: string): Database.Statement<P, R> {
  let cache = statements.get(db);
  if (cache === undefined) statements.set(db, (cache = new Map()));
  let s = cache.get(sql);
  if (s === undefined) cache.set(sql, (s = db.prepare(sql)));
  return s as unknown as Database.Statement<P, R>;
}
