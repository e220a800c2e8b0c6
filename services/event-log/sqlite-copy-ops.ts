import type Database from "better-sqlite3";
import { readOp, writeOp } from "../storage/sqlite-op.js";
import { copyStatement, idsOp } from "../storage/copy/sqlite-copy-op.js";
import type { CopyChunk, CopyReadRequest } from "../storage/copy/kind-store.js";
import { LOG_CHUNK_RECORDS, chunkOfPage, type EventLogChunk } from "./copy-format.js";
import { eventLogOps } from "./sqlite-ops.js";

/** Reads one chunk of a log through the store's own page read (whatever holds the records). */
function readChunk(db: Database.Database, r: CopyReadRequest, ctx: Parameters<(typeof eventLogOps)["events.read"]["run"]>[2]): CopyChunk<EventLogChunk> {
  return chunkOfPage(r.id, eventLogOps["events.read"].run(db, { sessionId: r.id, afterPosition: r.after, maxRecords: LOG_CHUNK_RECORDS }, ctx));
}

/**
 * Stores a chunk: creates the log with the chunk's generation (or checks it
 * is the one the log has), inserts the records it does not hold yet at their
 * positions, and sets the length to the last position held.
 *
 * @throws Error when the log holds another generation, or the chunk would
 *   leave a hole before its first record.
 */
function writeChunk(db: Database.Database, c: EventLogChunk): void {
  let log = copyStatement<[string], { log_id: number; generation: string | null; length: number }>(db, `SELECT log_id, generation, length FROM event_logs WHERE session_id = ?`).get(c.sessionId);
  if (log === undefined) {
    const row = copyStatement(db, `INSERT INTO event_logs (session_id, generation, length, stamp) VALUES (?, NULL, 0, (SELECT coalesce(max(stamp), 0) + 1 FROM event_logs)) RETURNING log_id`).get(c.sessionId) as { log_id: number };
    log = { log_id: row.log_id, generation: null, length: 0 };
  }
  if (log.generation !== null && log.generation !== c.generation) throw new Error(`the event log of ${JSON.stringify(c.sessionId)} in the target has generation ${log.generation}, not ${c.generation}`);
  const first = c.records[0]!.position;
  if (first > log.length + 1) throw new Error(`the event log of ${JSON.stringify(c.sessionId)} in the target has ${log.length} records; records from ${first} on would leave a hole`);
  const insert = copyStatement(db, `INSERT INTO event_records (log_id, position, format, payload, reason) VALUES (?, ?, ?, ?, ?) ON CONFLICT (log_id, position) DO NOTHING`);
  for (const r of c.records) {
    insert.run(log.log_id, r.position, r.kind === "event" ? r.format : null, r.kind === "event" ? r.payload : null, r.kind === "gap" ? r.reason : null);
  }
  const length = Math.max(log.length, c.records.at(-1)!.position);
  copyStatement(db, `UPDATE event_logs SET generation = ?, length = ?, stamp = (SELECT coalesce(max(stamp), 0) + 1 FROM event_logs) WHERE log_id = ?`).run(c.generation, length, log.log_id);
}

/**
 * The event log's copy operations on the SQLite worker (issue 14; see
 * services/storage/copy/kind-store.ts): `events.copy.ids` → the session id
 * of every log that has records (a deleted log has none and no generation);
 * `events.copy.read` {requests} → one {@link EventLogChunk} per request;
 * `events.copy.write` {records} (chunks) keeping generations and positions;
 * `events.copy.erase` removes every log.
 */
export const eventLogCopyOps = {
  "events.copy.ids": idsOp(`SELECT session_id FROM event_logs WHERE generation IS NOT NULL`),
  "events.copy.read": readOp((db, a: { requests: CopyReadRequest[] }, ctx) => db.transaction(() => a.requests.map((r) => readChunk(db, r, ctx)))()),
  "events.copy.write": writeOp((db, a: { records: EventLogChunk[] }) => {
    for (const c of a.records) writeChunk(db, c);
  }),
  "events.copy.erase": writeOp((db, _a: Record<string, never>) => {
    db.exec(`DELETE FROM event_records; DELETE FROM event_logs;`);
  }),
};
