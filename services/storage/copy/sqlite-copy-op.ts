import { readOp, type SqliteOp } from "../sqlite-op.js";
import { statement } from "../sqlite-statement.js";

/**
 * A copy `ids` operation on the SQLite worker (issue 14,
 * services/storage/copy/kind-store.ts): the first column of every row `sql`
 * selects, as strings.
 */
export function idsOp(sql: string): SqliteOp<Record<string, never>, string[]> {
  return readOp((db) => db.prepare(sql).pluck().all() as string[]);
}

/** The statement for `sql` on `db`, prepared once per connection (storage/sqlite-statement.ts): a copy runs each of its statements hundreds of thousands of times. */
export const copyStatement = statement;
