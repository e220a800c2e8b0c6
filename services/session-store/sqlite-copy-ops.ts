import type Database from "better-sqlite3";
import { randomBytes } from "node:crypto";
import { readOp, writeOp } from "../storage/sqlite-op.js";
import { copyStatement, idsOp } from "../storage/copy/sqlite-copy-op.js";
import { wholeRecords, type CopyReadRequest } from "../storage/copy/kind-store.js";
import { copiedProjection, lineageCopyId, parseLineageCopyId, type SessionCopy } from "./copy-format.js";
import { putSession, sessionStoreOps } from "./sqlite-ops.js";
import { dropChunks } from "./sqlite-blobs.js";
import { LINEAGE_COLUMNS, toLineageRecord, upsertLineage, writeProjection, type LineageDbRow } from "./sqlite-metadata.js";
import type { ActivityState } from "./activity.js";
import type { LineageRecord } from "./store.js";

interface RowColumns {
  modified_us: number;
  activity_state: string | null;
  estimated_bytes: number | null;
  metadata: string | null;
}

/** Reads one session for a copy: the snapshot through the store's own Load (whatever holds the payload), and its metadata row. */
function readSession(db: Database.Database, sessionId: string, ctx: Parameters<(typeof sessionStoreOps)["session.load"]["run"]>[2]): SessionCopy | undefined {
  const snapshot = sessionStoreOps["session.load"].run(db, { sessionId }, ctx);
  const row = copyStatement<[string], RowColumns>(db, 
      `SELECT s.modified_us, m.activity_state, m.estimated_bytes, m.metadata FROM sessions s LEFT JOIN session_metadata m ON m.session_id = s.session_id WHERE s.session_id = ?`,
    )
    .get(sessionId);
  if (snapshot === undefined || row === undefined) return undefined;
  return {
    sessionId,
    format: snapshot.format,
    payload: snapshot.payload,
    modifiedAtMicros: row.modified_us,
    // Schema 2 gives every session a row; estimated_bytes is the payload length when it does not.
    activityState: (row.activity_state ?? "") as ActivityState,
    estimatedBytes: row.estimated_bytes ?? snapshot.payload.byteLength,
    metadata: row.metadata ?? undefined,
  };
}

/**
 * The session store's copy operations on the SQLite worker (issue 14; see
 * services/storage/copy/kind-store.ts):
 *
 * - `session.copy.ids` → every session id; `session.copy.read` {requests}
 *   → the {@link SessionCopy} of each (undefined when gone);
 * - `session.copy.write` {records}: stores each snapshot (inline, whatever
 *   its size) with its save time and its metadata row as given, keeping the paging scopes' counts and
 *   generations right (an upsert, so writing a session again is harmless);
 * - `session.copy.lineageIds`, `session.copy.lineageRead` {requests},
 *   `session.copy.lineageWrite` {records}: lineage records, tombstones
 *   included, stored exactly as given;
 * - `session.copy.erase`: removes every session (staged and chunked payloads
 *   included), metadata row, lineage
 *   record and paging scope, and gives the store a new id so that no
 *   PageMetadata cursor issued before is taken for one of the new contents.
 */
export const sessionCopyOps = {
  "session.copy.ids": idsOp(`SELECT session_id FROM sessions`),
  "session.copy.read": readOp((db, a: { requests: CopyReadRequest[] }, ctx) => wholeRecords(a.requests, (id) => readSession(db, id, ctx))),
  "session.copy.write": writeOp((db, a: { records: SessionCopy[] }) => {
    for (const s of a.records) {
      const { garbage } = putSession(db, { sessionId: s.sessionId, format: s.format, payload: s.payload, blobId: null, modifiedUs: s.modifiedAtMicros }, false);
      // A copy writes in batches, offline: the chunks of a payload it replaced go at once.
      if (garbage !== undefined) while (dropChunks(db, garbage) > 0);
      writeProjection(db, s.sessionId, s.modifiedAtMicros, copiedProjection(s));
    }
  }),
  "session.copy.lineageIds": readOp((db, _a: Record<string, never>): string[] =>
    copyStatement<[], { session_id: string; incarnation: string }>(db, `SELECT session_id, incarnation FROM session_lineage`)
      .all()
      .map((r) => lineageCopyId(r.session_id, r.incarnation)),
  ),
  "session.copy.lineageRead": readOp((db, a: { requests: CopyReadRequest[] }) => {
    const get = copyStatement<[string, string], LineageDbRow>(db, `SELECT ${LINEAGE_COLUMNS} FROM session_lineage WHERE session_id = ? AND incarnation = ?`);
    return wholeRecords(a.requests, (id): LineageRecord | undefined => {
      const { sessionId, incarnation } = parseLineageCopyId(id);
      const row = get.get(sessionId, incarnation);
      return row === undefined ? undefined : toLineageRecord(row);
    });
  }),
  "session.copy.lineageWrite": writeOp((db, a: { records: LineageRecord[] }) => {
    for (const r of a.records) upsertLineage(db, r);
  }),
  "session.copy.erase": writeOp((db, _a: Record<string, never>) => {
    db.exec(`DELETE FROM sessions; DELETE FROM session_blob_chunks; DELETE FROM session_stages; DELETE FROM session_metadata; DELETE FROM session_lineage; DELETE FROM session_scopes;`);
    copyStatement(db, `UPDATE session_store_info SET value = ? WHERE key = 'store_id'`).run(randomBytes(8).toString("hex"));
  }),
};
