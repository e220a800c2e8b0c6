import { readOp, writeOp } from "../sqlite-op.js";

/**
 * Where an unfinished `mecatl-drivers copy` keeps its progress in an SQLite
 * target (issue 14): the table `copy_progress`, one row, created by the first
 * checkpoint and dropped when the copy has finished and verified. Operations
 * on the SQLite worker: `copy.progress.read` → the stored text or
 * undefined, `copy.progress.write` {text}, `copy.progress.clear`; and
 * `copy.schema`, the schema versions a source file holds.
 */
export const copyProgressOps = {
  "copy.progress.read": readOp((db, _a: Record<string, never>): string | undefined => {
    if (db.prepare(`SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'copy_progress'`).get() === undefined) return undefined;
    return db.prepare<[], { state: string }>(`SELECT state FROM copy_progress WHERE id = 1`).get()?.state;
  }),
  "copy.progress.write": writeOp((db, a: { text: string }) => {
    db.exec(`CREATE TABLE IF NOT EXISTS copy_progress (id INTEGER NOT NULL PRIMARY KEY CHECK (id = 1), state TEXT NOT NULL) STRICT`);
    db.prepare(`INSERT INTO copy_progress (id, state) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET state = excluded.state`).run(a.text);
  }),
  "copy.progress.clear": writeOp((db, _a: Record<string, never>) => {
    db.exec(`DROP TABLE IF EXISTS copy_progress`);
  }),
  /** The schema version of every component (`schema_migrations`), so that a source opened read-only can be checked against this build. */
  "copy.schema": readOp((db, _a: Record<string, never>): Array<{ component: string; version: number }> => {
    if (db.prepare(`SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'schema_migrations'`).get() === undefined) return [];
    return db.prepare<[], { component: string; version: number }>(`SELECT component, version FROM schema_migrations`).all();
  }),
};
