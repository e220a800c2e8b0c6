import { SCAN_PAGE_ENTRIES, takePage, type Page } from "../storage/index-scan.js";
import { fitting, inlineReadOp, readOp, writeOp, type Migration, type OpContext } from "../storage/sqlite-op.js";
import { statement } from "../storage/sqlite-statement.js";
import { projectStoredSnapshot, type SessionProjection } from "./projection.js";
import { metadataMigration, readLineage, readMetadataPage, removeProjection, writeProjection } from "./sqlite-metadata.js";
import type { LineageQuery, MetadataPageQuery, StoredSessionInfo, StoredSnapshot } from "./store.js";

/**
 * Schema of the session store on SQLite: version 1 holds one row per session
 * (`sessions`); version 2 adds metadata rows, lineage records and paging
 * scopes (see sqlite-metadata.ts), filled from the existing sessions when a
 * store written by an earlier build is opened.
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
export const sessionDeleteHooks: Array<(db: import("better-sqlite3").Database, sessionId: string, ctx: OpContext) => void> = [];

/** Arguments of Save and Create: the snapshot and its projection (computed by the service). */
interface WriteArgs {
  sessionId: string;
  snapshot: StoredSnapshot;
  projection: SessionProjection;
}

/** The session store's operations on the SQLite worker (wire-contract.md section 2.5; issue 12). */
export const sessionStoreOps = {
  "session.save": writeOp((db, a: WriteArgs) => {
    const now = saveMicros();
    statement(
      db,
      `INSERT INTO sessions (session_id, format, payload, modified_us) VALUES (?, ?, ?, ?)
       ON CONFLICT (session_id) DO UPDATE SET format = excluded.format, payload = excluded.payload, modified_us = excluded.modified_us`,
    ).run(a.sessionId, a.snapshot.format, a.snapshot.payload, now);
    writeProjection(db, a.sessionId, now, a.projection);
  }),
  "session.create": writeOp((db, a: WriteArgs): boolean => {
    const now = saveMicros();
    const r = statement(db, `INSERT INTO sessions (session_id, format, payload, modified_us) VALUES (?, ?, ?, ?) ON CONFLICT (session_id) DO NOTHING`).run(a.sessionId, a.snapshot.format, a.snapshot.payload, now);
    if (r.changes !== 1) return false;
    writeProjection(db, a.sessionId, now, a.projection);
    return true;
  }),
  /** Inline (on the main thread) for a snapshot of at most 1 MiB; a larger one is read by the reader worker. */
  "session.load": inlineReadOp((db, a: { sessionId: string }, ctx): StoredSnapshot | undefined => {
    const row = fitting(
      statement<[string, number], { format: string; payload: Buffer }>(db, `SELECT format, payload FROM sessions WHERE session_id = ? AND length(payload) <= ?`).get(a.sessionId, ctx.readBytes),
      () => statement(db, `SELECT 1 FROM sessions WHERE session_id = ?`).get(a.sessionId) !== undefined,
    );
    return row === undefined ? undefined : { format: row.format, payload: row.payload };
  }),
  /** One page of List: ids in byte order strictly after `after` (keyset over the primary key). */
  "session.listPage": readOp((db, a: { after: string | undefined }): Page<StoredSessionInfo, string> => {
    const rows =
      a.after === undefined
        ? statement<[number], SessionRow>(db, `SELECT session_id, modified_us FROM sessions ORDER BY session_id LIMIT ?`).iterate(SCAN_PAGE_ENTRIES)
        : statement<[string, number], SessionRow>(db, `SELECT session_id, modified_us FROM sessions WHERE session_id > ? ORDER BY session_id LIMIT ?`).iterate(a.after, SCAN_PAGE_ENTRIES);
    return takePage(rows, (r) => ({ sessionId: r.session_id, modifiedAtMicros: r.modified_us }), (r) => r.session_id.length, (r) => r.session_id);
  }),
  "session.count": readOp((db, _a: Record<string, never>): number => statement<[], { n: number }>(db, `SELECT count(*) AS n FROM sessions`).get()!.n),
  "session.delete": writeOp((db, a: { sessionId: string }, ctx) => {
    statement(db, `DELETE FROM sessions WHERE session_id = ?`).run(a.sessionId);
    removeProjection(db, a.sessionId, saveMicros());
    for (const hook of sessionDeleteHooks) hook(db, a.sessionId, ctx);
  }),
  "session.page": readOp((db, a: MetadataPageQuery) => readMetadataPage(db, a)),
  "session.lineage": readOp((db, a: LineageQuery) => readLineage(db, a)),
};
