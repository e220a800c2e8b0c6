import type Database from "better-sqlite3";
import type { Migration } from "./sqlite-op.js";

/**
 * The durability settings a live SQLite connection reports (`PRAGMA
 * journal_mode` and `PRAGMA synchronous`, read back after they were set):
 * `journalMode` in lower case (`wal`, `memory`, ...), `synchronous` as its
 * name (`off`, `normal`, `full`, `extra`).
 */
export interface SqliteDurabilitySettings {
  journalMode: string;
  synchronous: string;
}

const SYNCHRONOUS_NAMES = ["off", "normal", "full", "extra"];

/** Reads {@link SqliteDurabilitySettings} from the connection (issue 15: what is in force, not what was asked for). */
export function readDurabilitySettings(db: Database.Database): SqliteDurabilitySettings {
  const synchronous = Number(db.pragma("synchronous", { simple: true }));
  return {
    journalMode: String(db.pragma("journal_mode", { simple: true })).toLowerCase(),
    synchronous: SYNCHRONOUS_NAMES[synchronous] ?? String(synchronous),
  };
}

/**
 * Sets the connection pragmas docs/DESIGN.md "Backends" requires: WAL journal,
 * `synchronous=FULL` (a commit is fsynced before it returns, so OK means
 * durable), foreign keys, and a busy timeout so that two server processes on
 * one file wait for each other instead of failing. With `durable` false
 * (`sqlite::memory:` only) synchronous is left OFF.
 *
 * @param busyTimeoutMs milliseconds a writer waits for another process's lock.
 */
export function applyPragmas(db: Database.Database, options: { busyTimeoutMs: number; durable: boolean }): void {
  db.pragma(`busy_timeout = ${Math.trunc(options.busyTimeoutMs)}`);
  if (db.memory) {
    db.pragma("synchronous = OFF");
  } else {
    const mode = db.pragma("journal_mode = WAL", { simple: true });
    if (String(mode).toLowerCase() !== "wal") throw new Error(`could not switch ${db.name} to WAL journal mode (got ${mode})`);
    db.pragma(options.durable ? "synchronous = FULL" : "synchronous = NORMAL");
  }
  db.pragma("foreign_keys = ON");
}

/**
 * Ends the open transaction, if any, with ROLLBACK. After SQLITE_FULL,
 * SQLITE_IOERR, SQLITE_BUSY or SQLITE_NOMEM SQLite may already have rolled it
 * back by itself (https://sqlite.org/lang_transaction.html), and a ROLLBACK
 * that finds nothing to undo is no error here. Never throws.
 */
export function rollbackIfOpen(db: Database.Database): void {
  try {
    if (db.inTransaction) db.exec("ROLLBACK");
  } catch {
    // the transaction is gone either way
  }
}

/**
 * Applies every migration not yet recorded in `schema_migrations`, each in
 * one immediate transaction per component, and refuses to open a database whose
 * recorded version for a component is newer than this build knows.
 *
 * @throws Error naming the component when the file was written by a newer build.
 */
export function migrate(db: Database.Database, migrations: readonly Migration[]): void {
  db.exec(
    "CREATE TABLE IF NOT EXISTS schema_migrations (component TEXT NOT NULL PRIMARY KEY, version INTEGER NOT NULL) STRICT",
  );
  const current = db.prepare<[string], { version: number }>("SELECT version FROM schema_migrations WHERE component = ?");
  const record = db.prepare("INSERT INTO schema_migrations (component, version) VALUES (?, ?) ON CONFLICT (component) DO UPDATE SET version = excluded.version");
  const components = [...new Set(migrations.map((m) => m.component))];
  for (const component of components) {
    const mine = migrations.filter((m) => m.component === component).sort((a, b) => a.version - b.version);
    const known = mine.at(-1)?.version ?? 0;
    // Read and apply under one write lock, so two processes opening the same
    // file at once never apply a migration twice.
    db.exec("BEGIN IMMEDIATE");
    try {
      const have = current.get(component)?.version ?? 0;
      if (have > known) {
        throw new Error(`the database schema for ${component} is version ${have}, newer than this build knows (${known}); upgrade mecatl-drivers`);
      }
      for (const m of mine.filter((x) => x.version > have)) {
        db.exec(m.sql);
        m.run?.(db);
        record.run(component, m.version);
      }
      db.exec("COMMIT");
    } catch (err) {
      db.exec("ROLLBACK");
      throw err;
    }
  }
}
