import type { Migration, OpTable } from "./sqlite-op.js";
import { sessionStoreOps, sessionStoreMigrations } from "../session-store/sqlite-ops.js";
import { eventLogOps, eventLogMigrations } from "../event-log/sqlite-ops.js";
import { sessionLeaseOps, sessionLeaseMigrations } from "../session-lease/sqlite-ops.js";
import { scheduleStoreOps, scheduleStoreMigrations } from "../schedule-store/sqlite-ops.js";

/**
 * Every operation the SQLite worker can run, by name. Each service contributes
 * one table from its own `sqlite-ops.ts`; names are prefixed by the service
 * (`session.save`, `events.append`, ...).
 */
export const sqliteOps = {
  ...sessionStoreOps,
  ...eventLogOps,
  ...sessionLeaseOps,
  ...scheduleStoreOps,
} satisfies OpTable;

/** The operation names and their argument/result types, for typed calls. */
export type SqliteOps = typeof sqliteOps;

/** Every schema migration, applied at open in (component, version) order. */
export const sqliteMigrations: readonly Migration[] = [...sessionStoreMigrations, ...eventLogMigrations, ...sessionLeaseMigrations, ...scheduleStoreMigrations];
