import type Database from "better-sqlite3";
import { statfsSync } from "node:fs";
import { dirname } from "node:path";
import type { Migration } from "./sqlite-op.js";
import { rollbackIfOpen } from "./sqlite-schema.js";

/**
 * The table {@link probeWrite} writes to: one row, rewritten by every probe.
 * Component `storage` in `schema_migrations`.
 */
export const storageMigrations: readonly Migration[] = [
  {
    component: "storage",
    version: 1,
    sql: "CREATE TABLE storage_probe (id INTEGER NOT NULL PRIMARY KEY, probed_at_ms INTEGER NOT NULL) STRICT;",
  },
];

/**
 * Bytes that must be free on the file system holding the database before a
 * store that ran out of space counts as writable again (1 MiB). Without this
 * margin a tiny probe can succeed in space the WAL already holds while the
 * next real write fails again, and health would flap.
 */
export const PROBE_MIN_FREE_BYTES = 1024 * 1024;

/** What {@link probeWrite} found: writable, or the error a write would get (code as better-sqlite3 or Node.js names it). */
export type ProbeResult = { ok: true } | { ok: false; code: string | undefined; message: string };

/**
 * Checks cheaply whether a write can succeed now (issue 9, health after a full
 * disk or an I/O error): at least {@link PROBE_MIN_FREE_BYTES} free on the file system of
 * `path` (statfs; skipped for `:memory:`), then one tiny write committed in
 * its own transaction. Run on the SQLite worker, between group commits.
 * Never throws.
 */
export function probeWrite(db: Database.Database, path: string): ProbeResult {
  try {
    if (!db.memory) {
      const fs = statfsSync(dirname(path));
      const free = fs.bavail * fs.bsize;
      if (free < PROBE_MIN_FREE_BYTES) return { ok: false, code: "SQLITE_FULL", message: `only ${free} bytes free, ${PROBE_MIN_FREE_BYTES} needed` };
    }
    db.exec("BEGIN IMMEDIATE");
    try {
      db.prepare("INSERT INTO storage_probe (id, probed_at_ms) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET probed_at_ms = excluded.probed_at_ms").run(Date.now());
      db.exec("COMMIT");
    } catch (err) {
      rollbackIfOpen(db);
      throw err;
    }
    return { ok: true };
  } catch (err) {
    const e = err as { code?: string; message?: string };
    return { ok: false, code: e.code, message: e.message ?? String(err) };
  }
}
