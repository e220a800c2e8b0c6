import { SCAN_PAGE_ENTRIES, takePage, type Page } from "../storage/index-scan.js";
import type Database from "better-sqlite3";
import { inlineReadOp, largeWriteOp, NeedsWorker, readOp, UNLIMITED_READ_BYTES, writeOp, type Migration, type OpContext } from "../storage/sqlite-op.js";
import { statement } from "../storage/sqlite-statement.js";
import { projectStoredSnapshot, type SessionProjection } from "./projection.js";
import { PAYLOAD_HEADROOM_BYTES } from "../../common/payload-headroom.js";
import { abandonStage, beginStage, blobMigration, dropChunks, endStage, readBlob, writeChunk } from "./sqlite-blobs.js";
import { metadataMigration, readLineage, readMetadataPage, removeProjection, writeProjection } from "./sqlite-metadata.js";
import type { LineageQuery, MetadataPageQuery, StoredSessionInfo, StoredSnapshot } from "./store.js";

/**
 * Schema of the session store on SQLite: version 1 holds one row per session
 * (`sessions`); version 2 adds metadata rows, lineage records and paging
 * scopes (see sqlite-metadata.ts), filled from the existing sessions when a
 * store written by an earlier build is opened; version 3 adds payloads held
 * in chunks (see sqlite-blobs.ts).
 */
export const sessionStoreMigrations: readonly Migration[] = [
  {
    component: "session-store",
    version: 1,
    sql: `CREATE TABLE sessions (
            session_id  TEXT    NOT NULL PRIMARY KEY,
            format      TEXT    NOT NULL,
            payload     BLOB    NOT NULL,
            modified_us INTEGER NOT NULL
          ) STRICT;`,
  },
  metadataMigration(projectStoredSnapshot),
  blobMigration,
];

interface SessionRow {
  session_id: string;
  modified_us: number;
}

let lastSaveMicros = 0;

/** Save time in microseconds, never earlier than a previous save by this process. */
function saveMicros(): number {
  lastSaveMicros = Math.max(lastSaveMicros, Date.now() * 1000);
  return lastSaveMicros;
}

/**
 * Hooks run inside the session-delete transaction to remove the rest of a
 * session's records (the event log adds its own), so deletion is atomic. A
 * hook may report its change through `ctx` (delivered after commit).
 */
export const sessionDeleteHooks: Array<(db: Database.Database, sessionId: string, ctx: OpContext) => void> = [];

/** Arguments of Save and Create: the snapshot and its projection (computed by the service). */
interface WriteArgs {
  sessionId: string;
  /** The snapshot; its payload is empty when `staged` names the blob holding it. */
  snapshot: StoredSnapshot;
  projection: SessionProjection;
  /** A payload staged in chunks (sqlite-blobs.ts): the blob and its size in bytes, published by this write. */
  staged?: { blobId: number; size: number };
}

/** What Save and Create did: whether they wrote, and a blob that became garbage (the one replaced, or a refused Create's own), to drop. */
export interface PutResult {
  written: boolean;
  garbage: number | undefined;
}

/**
 * Stores a session row: the payload inline, or a pointer to the blob
 * `blobId` (payload column empty). With `onlyIfAbsent`, writes only when the
 * id is new. Returns whether it wrote, and the blob the row pointed at
 * before, if any, which is now garbage.
 */
export function putSession(db: Database.Database, row: { sessionId: string; format: string; payload: Uint8Array; blobId: number | null; modifiedUs: number }, onlyIfAbsent: boolean): PutResult {
  const before = statement<[string], { blob_id: number | null }>(db, `SELECT blob_id FROM sessions WHERE session_id = ?`).get(row.sessionId);
  if (before !== undefined && onlyIfAbsent) return { written: false, garbage: undefined };
  statement(
    db,
    `INSERT INTO sessions (session_id, format, payload, modified_us, blob_id) VALUES (?, ?, ?, ?, ?)
     ON CONFLICT (session_id) DO UPDATE SET format = excluded.format, payload = excluded.payload, modified_us = excluded.modified_us, blob_id = excluded.blob_id`,
  ).run(row.sessionId, row.format, row.payload, row.modifiedUs, row.blobId);
  return { written: true, garbage: before?.blob_id ?? undefined };
}

/** Save (`onlyIfAbsent` false) or Create: publishes a staged blob if there is one, stores the row and its projection. */
function put(db: Database.Database, a: WriteArgs, onlyIfAbsent: boolean): PutResult {
  if (onlyIfAbsent && statement(db, `SELECT 1 FROM sessions WHERE session_id = ?`).get(a.sessionId) !== undefined) {
    if (a.staged !== undefined) abandonStage(db, a.staged.blobId);
    return { written: false, garbage: a.staged?.blobId };
  }
  if (a.staged !== undefined) endStage(db, a.staged.blobId, a.staged.size);
  const now = saveMicros();
  const result = putSession(db, { sessionId: a.sessionId, format: a.snapshot.format, payload: a.snapshot.payload, blobId: a.staged?.blobId ?? null, modifiedUs: now }, onlyIfAbsent);
  writeProjection(db, a.sessionId, now, a.projection);
  return result;
}

interface LoadRow {
  format: string;
  blob_id: number | null;
  /** NULL when the payload is in a blob, or larger than the read may load. */
  payload: Buffer | null;
}

/** The row of a session: its payload when held inline and at most `readBytes` long. */
function loadRow(db: Database.Database, sessionId: string, readBytes: number): LoadRow | undefined {
  return statement<[number, string], LoadRow>(
    db,
    `SELECT format, blob_id, CASE WHEN blob_id IS NULL AND length(payload) <= ? THEN payload END AS payload FROM sessions WHERE session_id = ?`,
  ).get(readBytes, sessionId);
}

/** A session's snapshot whatever holds its payload, read in one transaction (reader worker only: it may be 64 MiB). */
function loadWhole(db: Database.Database, sessionId: string): StoredSnapshot | undefined {
  const row = loadRow(db, sessionId, UNLIMITED_READ_BYTES);
  if (row === undefined) return undefined;
  if (row.payload !== null) return { format: row.format, payload: row.payload };
  return { format: row.format, payload: readBlob(db, row.blob_id!), headroom: PAYLOAD_HEADROOM_BYTES };
}

/**
 * The session store's operations on the SQLite worker (wire-contract.md
 * section 2.5; issue 12). A payload above 1 MiB is staged in chunks first
 * (`session.stage`, `session.stageChunk`, then Save or Create with `staged`;
 * see sqlite-blobs.ts); Save, Create and Delete answer the blob they made
 * garbage, which the store drops with `session.dropChunks`.
 */
export const sessionStoreOps = {
  "session.save": writeOp((db, a: WriteArgs): PutResult => put(db, a, false)),
  "session.create": writeOp((db, a: WriteArgs): PutResult => put(db, a, true)),
  /** Starts staging a large payload for process `owner` (storage/process-identity.ts); answers the blob id. */
  "session.stage": writeOp((db, a: { owner: string }): number => beginStage(db, a.owner)),
  /** One chunk of a staged payload, in its own transaction. */
  "session.stageChunk": largeWriteOp((db, a: { blobId: number; seq: number; bytes: Uint8Array }) => writeChunk(db, a.blobId, a.seq, a.bytes)),
  /** Gives up a staging (a Save that failed midway). */
  "session.unstage": writeOp((db, a: { blobId: number }) => abandonStage(db, a.blobId)),
  /** Deletes a few chunks of a garbage blob; answers how many (0: nothing left). */
  "session.dropChunks": largeWriteOp((db, a: { blobId: number }): number => dropChunks(db, a.blobId)),
  /**
   * Inline (on the main thread) for a payload of at most 1 MiB held in the
   * row; a larger one, or one held in a blob, is read by the reader worker.
   */
  "session.load": inlineReadOp((db, a: { sessionId: string }, ctx): StoredSnapshot | undefined => {
    const row = loadRow(db, a.sessionId, ctx.readBytes);
    if (row === undefined) return undefined;
    if (row.payload !== null) return { format: row.format, payload: row.payload };
    if (ctx.readBytes < UNLIMITED_READ_BYTES) throw new NeedsWorker();
    return db.transaction(() => loadWhole(db, a.sessionId))();
  }),
  /** Whether the session has a snapshot (a large Create's check before it stages anything). */
  "session.exists": inlineReadOp((db, a: { sessionId: string }): boolean => statement<[string], { one: number }>(db, `SELECT 1 AS one FROM sessions WHERE session_id = ?`).get(a.sessionId) !== undefined),
  /** One page of List: ids in byte order strictly after `after` (keyset over the primary key). */
  "session.listPage": readOp((db, a: { after: string | undefined }): Page<StoredSessionInfo, string> => {
    const rows =
      a.after === undefined
        ? statement<[number], SessionRow>(db, `SELECT session_id, modified_us FROM sessions ORDER BY session_id LIMIT ?`).iterate(SCAN_PAGE_ENTRIES)
        : statement<[string, number], SessionRow>(db, `SELECT session_id, modified_us FROM sessions WHERE session_id > ? ORDER BY session_id LIMIT ?`).iterate(a.after, SCAN_PAGE_ENTRIES);
    return takePage(rows, (r) => ({ sessionId: r.session_id, modifiedAtMicros: r.modified_us }), (r) => r.session_id.length, (r) => r.session_id);
  }),
  "session.count": readOp((db, _a: Record<string, never>): number => statement<[], { n: number }>(db, `SELECT count(*) AS n FROM sessions`).get()!.n),
  /** Answers the blob that held the payload, if one did (now garbage). */
  "session.delete": writeOp((db, a: { sessionId: string }, ctx): number | undefined => {
    const row = statement<[string], { blob_id: number | null }>(db, `DELETE FROM sessions WHERE session_id = ? RETURNING blob_id`).get(a.sessionId);
    removeProjection(db, a.sessionId, saveMicros());
    for (const hook of sessionDeleteHooks) hook(db, a.sessionId, ctx);
    return row?.blob_id ?? undefined;
  }),
  "session.page": readOp((db, a: MetadataPageQuery) => readMetadataPage(db, a)),
  "session.lineage": readOp((db, a: LineageQuery) => readLineage(db, a)),
};
