import type Database from "better-sqlite3";
import { randomBytes } from "node:crypto";
import { inlineReadOp, NeedsWorker, writeOp, type Migration, type OpContext } from "../storage/sqlite-op.js";
import { statement } from "../storage/sqlite-statement.js";
import { sessionDeleteHooks } from "../session-store/sqlite-ops.js";
import { PAGE_BYTES, type Appended, type LogPage, type NewRecord, type StoredRecord } from "./store.js";

/**
 * Schema of the event log on SQLite.
 *
 * `event_logs` has one row per session that was ever appended to: its
 * generation (NULL once the session was deleted, until the next append mints
 * a new one), its length, and a change `stamp` that grows with every commit
 * touching the row, so another process's poller can ask "what changed since
 * stamp N" through an index instead of scanning. `event_records` holds the
 * records, keyed by (log, position); an event has `format` and `payload`, a gap
 * has `reason`.
 */
export const eventLogMigrations: readonly Migration[] = [
  {
    component: "event-log",
    version: 1,
    sql: `CREATE TABLE event_logs (
            log_id     INTEGER PRIMARY KEY,
            session_id TEXT    NOT NULL UNIQUE,
            generation TEXT,
            length     INTEGER NOT NULL,
            stamp      INTEGER NOT NULL
          ) STRICT;
          CREATE INDEX event_logs_by_stamp ON event_logs (stamp);
          CREATE TABLE event_records (
            log_id   INTEGER NOT NULL,
            position INTEGER NOT NULL,
            format   TEXT,
            payload  BLOB,
            reason   TEXT,
            PRIMARY KEY (log_id, position),
            CHECK ((format IS NOT NULL AND payload IS NOT NULL AND reason IS NULL) OR (format IS NULL AND payload IS NULL AND reason IS NOT NULL))
          ) STRICT;`,
  },
];

/** Notification topic the event-log ops report changes on (data: {@link LogChange}). */
export const EVENTS_TOPIC = "events";

/** What an event-log op reports after commit: the session, its generation (null = deleted) and length. */
export interface LogChange {
  sessionId: string;
  generation: string | null;
  length: number;
}

/** The answer of `events.poll`: the connection's data version and changed logs with stamps above the asked one. */
export interface PollResult {
  dataVersion: number;
  /** Highest stamp seen (the next poll's `afterStamp`). */
  stamp: number;
  changes: LogChange[];
  /** True when more changes are waiting than one answer carries. */
  more: boolean;
}

/** Most changed logs one poll returns. */
const POLL_ROWS = 512;

const NEXT_STAMP = `(SELECT coalesce(max(stamp), 0) + 1 FROM event_logs)`;

interface LogRow {
  log_id: number;
  generation: string | null;
  length: number;
}

function findLog(db: Database.Database, sessionId: string): LogRow | undefined {
  return statement(db, `SELECT log_id, generation, length FROM event_logs WHERE session_id = ?`).get(sessionId) as LogRow | undefined;
}

function append(db: Database.Database, a: { sessionId: string; record: NewRecord }, ctx: OpContext): Appended {
  let log = findLog(db, a.sessionId);
  if (log === undefined) {
    const row = statement(db, `INSERT INTO event_logs (session_id, generation, length, stamp) VALUES (?, NULL, 0, ${NEXT_STAMP}) RETURNING log_id`).get(a.sessionId) as { log_id: number };
    log = { log_id: row.log_id, generation: null, length: 0 };
  }
  const generation = log.generation ?? randomBytes(8).toString("hex");
  const position = log.length + 1;
  const r = a.record;
  statement(db, `INSERT INTO event_records (log_id, position, format, payload, reason) VALUES (?, ?, ?, ?, ?)`).run(
    log.log_id,
    position,
    r.kind === "event" ? r.format : null,
    r.kind === "event" ? r.payload : null,
    r.kind === "gap" ? r.reason : null,
  );
  statement(db, `UPDATE event_logs SET generation = ?, length = ?, stamp = ${NEXT_STAMP} WHERE log_id = ?`).run(generation, position, log.log_id);
  ctx.notify(EVENTS_TOPIC, { sessionId: a.sessionId, generation, length: position } satisfies LogChange);
  return { generation, position };
}

interface RecordRow {
  position: number;
  format: string | null;
  /** NULL for a gap, and for an event whose payload is larger than the read may load. */
  payload: Buffer | null;
  /** Payload bytes (NULL for a gap). */
  size: number | null;
  reason: string | null;
}

/**
 * One page of a log. Stops before a record whose payload is larger than
 * `ctx.readBytes` (SQLite does not even load it); when that is the first
 * record, throws {@link NeedsWorker} so the page is read off the main thread.
 */
function readPage(db: Database.Database, a: { sessionId: string; afterPosition: number; maxRecords: number }, ctx: OpContext): LogPage | undefined {
  const log = findLog(db, a.sessionId);
  if (log === undefined || log.generation === null) return undefined;
  const records: StoredRecord[] = [];
  let bytes = 0;
  const rows = statement(
    db,
    `SELECT position, format, reason, length(payload) AS size, CASE WHEN length(payload) <= ? THEN payload END AS payload
     FROM event_records WHERE log_id = ? AND position > ? ORDER BY position LIMIT ?`,
  ).iterate(ctx.readBytes, log.log_id, a.afterPosition, a.maxRecords) as IterableIterator<RecordRow>;
  for (const row of rows) {
    const size = row.size ?? row.reason!.length;
    if (records.length > 0 && bytes + size > PAGE_BYTES) break;
    if (row.format !== null && row.payload === null) {
      if (records.length === 0) throw new NeedsWorker();
      break;
    }
    bytes += size;
    records.push(
      row.format !== null ? { kind: "event", format: row.format, payload: row.payload!, position: row.position } : { kind: "gap", reason: row.reason!, position: row.position },
    );
  }
  return { generation: log.generation, length: log.length, records };
}

/**
 * Removes a session's event log inside the session-delete transaction (pushed
 * onto the session store's delete hooks, docs/DESIGN.md "Event log"): deletes the
 * records, clears the generation so the next append mints a new one (every
 * old cursor then expires), and bumps the stamp so other processes' pollers
 * see the change.
 */
export function deleteEventLog(db: Database.Database, sessionId: string, ctx: OpContext): void {
  const log = findLog(db, sessionId);
  if (log === undefined || log.generation === null) return;
  statement(db, `DELETE FROM event_records WHERE log_id = ?`).run(log.log_id);
  statement(db, `UPDATE event_logs SET generation = NULL, length = 0, stamp = ${NEXT_STAMP} WHERE log_id = ?`).run(log.log_id);
  ctx.notify(EVENTS_TOPIC, { sessionId, generation: null, length: 0 } satisfies LogChange);
}

sessionDeleteHooks.push(deleteEventLog);

/**
 * The event log's operations on the SQLite worker (wire-contract.md section 3).
 *
 * - `events.append` {sessionId, record} → {generation, position}: one record
 *   at the next position, minting the generation if the log has none;
 *   group-committed like every write, so durable before it answers.
 * - `events.read` {sessionId, afterPosition, maxRecords} → LogPage | undefined:
 *   one page, read in one transaction so generation, length and records
 *   agree; inline (on the main thread) unless its first record is larger
 *   than 1 MiB.
 * - `events.poll` {dataVersion, afterStamp} → PollResult: for the cross-process
 *   follow feed (sqlite-feed.ts), inline on the main thread; when `PRAGMA
 *   data_version` is unchanged (no other connection committed, this
 *   process's writer included) it answers without a query, otherwise it
 *   lists logs whose stamp is above `afterStamp`. `afterStamp` -1 only reads the current
 *   highest stamp (the poller's starting point).
 */
export const eventLogOps = {
  "events.append": writeOp(append),
  "events.read": inlineReadOp((db, a: { sessionId: string; afterPosition: number; maxRecords: number }, ctx) => db.transaction(() => readPage(db, a, ctx))()),
  "events.poll": inlineReadOp((db, a: { dataVersion: number; afterStamp: number }): PollResult => {
    const dataVersion = db.pragma("data_version", { simple: true }) as number;
    if (a.afterStamp < 0) {
      const top = statement(db, `SELECT coalesce(max(stamp), 0) AS stamp FROM event_logs`).get() as { stamp: number };
      return { dataVersion, stamp: top.stamp, changes: [], more: false };
    }
    if (dataVersion === a.dataVersion) return { dataVersion, stamp: a.afterStamp, changes: [], more: false };
    const rows = statement(db, `SELECT session_id, generation, length, stamp FROM event_logs WHERE stamp > ? ORDER BY stamp LIMIT ${POLL_ROWS}`).all(a.afterStamp) as Array<{
      session_id: string;
      generation: string | null;
      length: number;
      stamp: number;
    }>;
    const more = rows.length === POLL_ROWS;
    // With more to come, report the same data version again so the next poll queries at once.
    return {
      dataVersion: more ? a.dataVersion : dataVersion,
      stamp: rows.at(-1)?.stamp ?? a.afterStamp,
      changes: rows.map((r) => ({ sessionId: r.session_id, generation: r.generation, length: r.length })),
      more,
    };
  }),
};
