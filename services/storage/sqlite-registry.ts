import { readOp, type Migration, type OpTable } from "./sqlite-op.js";
import { measureSqlite, type SqliteKindTables } from "./sqlite-measure.js";
import { sessionStoreOps, sessionStoreMigrations } from "../session-store/sqlite-ops.js";
import { removeAbandonedBlobs } from "../session-store/sqlite-blobs.js";
import { eventLogOps, eventLogMigrations } from "../event-log/sqlite-ops.js";
import { sessionLeaseOps, sessionLeaseMigrations } from "../session-lease/sqlite-ops.js";
import { scheduleStoreOps, scheduleStoreMigrations } from "../schedule-store/sqlite-ops.js";
import { sqliteCopyOps } from "../copy/sqlite-copy-ops.js";

/**
 * Where each kind of record lives in the schema the services below create,
 * for store measurements: the table counted, and the tables (with their
 * indexes) whose pages are the kind's bytes. A table not listed here counts
 * as `other`.
 */
export const sqliteKindTables: SqliteKindTables = {
  sessions: { counted: "sessions", tables: ["sessions", "session_blob_chunks", "session_stages"] },
  events: { counted: "event_records", tables: ["event_logs", "event_records"] },
  leases: { counted: "session_leases", tables: ["session_leases"] },
  schedules: { counted: "schedules", tables: ["schedules"] },
  fires: { counted: "schedule_fires", tables: ["schedule_fires"] },
};

/**
 * Every operation the SQLite worker can run, by name. Each service contributes
 * one table from its own `sqlite-ops.ts`; names are prefixed by the service
 * (`session.save`, `events.append`, ...).
 */
export const sqliteOps = {
  /** The store's size per kind (issue 14); see {@link measureSqlite}. */
  "store.measure": readOp((db, _a: Record<string, never>) => measureSqlite(db, sqliteKindTables)),
  ...sessionStoreOps,
  ...eventLogOps,
  ...sessionLeaseOps,
  ...scheduleStoreOps,
  /** Export/import for `mecatl-drivers copy` (issue 14). */
  ...sqliteCopyOps,
} satisfies OpTable;

/** The operation names and their argument/result types, for typed calls. */
export type SqliteOps = typeof sqliteOps;

/** Every schema migration, applied at open in (component, version) order. */
export const sqliteMigrations: readonly Migration[] = [...sessionStoreMigrations, ...eventLogMigrations, ...sessionLeaseMigrations, ...scheduleStoreMigrations];

/**
 * Work the writer runs once when it opens a read-write file, after the
 * migrations, each task in its own transaction: cleaning up what a process
 * that stopped mid-way left behind (issue 11: snapshot chunks it had staged).
 */
export const sqliteStartupTasks: ReadonlyArray<(db: import("better-sqlite3").Database) => void> = [removeAbandonedBlobs];
