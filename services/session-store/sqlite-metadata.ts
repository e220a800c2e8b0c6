import type Database from "better-sqlite3";
import { randomBytes } from "node:crypto";
import type { Migration } from "../storage/sqlite-op.js";
import { statement } from "../storage/sqlite-statement.js";
import type { SessionRelationship } from "../../common/session-relationship.js";
import { decodeMetadata, encodeMetadata, ownerScopeHex } from "./metadata-record.js";
import type { SessionProjection } from "./projection.js";
import type { LineageAnswer, LineageQuery, LineageRecord, MetadataPageAnswer, MetadataPageQuery, MetadataRow } from "./store.js";
import type { ActivityState } from "./activity.js";

/**
 * Schema version 2 of the session store (issue 12):
 *
 * - `session_metadata`: one row per stored session, written in the same
 *   transaction as its `sessions` row: save time, owner scope (hex, NULL when
 *   ownerless), current incarnation, size, activity and the projected fields
 *   as JSON. Two indexes serve PageMetadata in page order (save time
 *   descending, id ascending), one for all rows, one per owner scope, so a
 *   page reads O(limit) index entries and never touches `sessions`.
 * - `session_lineage`: lineage records keyed by (id, incarnation), with the
 *   three related (id, incarnation) pairs indexed. Rows are only ever
 *   inserted or updated: tombstones are never deleted.
 * - `session_scopes`: per paging scope (`all`, `owner:<hex>`), the number of
 *   rows and a generation bumped by every write that changes the scope. Rows
 *   are kept when the count drops to 0, so a generation never repeats.
 * - `session_store_info`: `store_id`, random, so that generations of two
 *   stores never match.
 */
const SCHEMA_V2 = `
CREATE TABLE session_metadata (
  session_id      TEXT    NOT NULL PRIMARY KEY,
  modified_us     INTEGER NOT NULL,
  owner_scope     TEXT,
  incarnation     TEXT,
  estimated_bytes INTEGER NOT NULL,
  activity_state  TEXT    NOT NULL,
  metadata        TEXT
) STRICT;
CREATE INDEX session_metadata_page ON session_metadata (modified_us DESC, session_id);
CREATE INDEX session_metadata_owner_page ON session_metadata (owner_scope, modified_us DESC, session_id) WHERE owner_scope IS NOT NULL;
CREATE TABLE session_lineage (
  session_id               TEXT    NOT NULL,
  incarnation              TEXT    NOT NULL,
  kind                     TEXT    NOT NULL,
  relationship             TEXT    NOT NULL,
  parent_session_id        TEXT,
  parent_incarnation       TEXT,
  origin_session_id        TEXT,
  origin_incarnation       TEXT,
  debug_target_session_id  TEXT,
  debug_target_incarnation TEXT,
  owner_scope              BLOB    NOT NULL,
  state                    TEXT    NOT NULL,
  deleted_us               INTEGER,
  PRIMARY KEY (session_id, incarnation)
) STRICT, WITHOUT ROWID;
CREATE INDEX session_lineage_parent ON session_lineage (parent_session_id, parent_incarnation) WHERE parent_incarnation IS NOT NULL;
CREATE INDEX session_lineage_origin ON session_lineage (origin_session_id, origin_incarnation) WHERE origin_incarnation IS NOT NULL;
CREATE INDEX session_lineage_debug ON session_lineage (debug_target_session_id, debug_target_incarnation) WHERE debug_target_incarnation IS NOT NULL;
CREATE TABLE session_scopes (
  scope      TEXT    NOT NULL PRIMARY KEY,
  generation INTEGER NOT NULL,
  count      INTEGER NOT NULL
) STRICT;
CREATE TABLE session_store_info (
  key   TEXT NOT NULL PRIMARY KEY,
  value TEXT NOT NULL
) STRICT;
`;

/** Paging scope key of every row. */
const ALL = "all";

function ownerScopeKey(hex: string): string {
  return `owner:${hex}`;
}

/** Adds `delta` rows to a scope and bumps its generation. */
function bumpScope(db: Database.Database, scope: string, delta: number): void {
  statement(
    db,
    `INSERT INTO session_scopes (scope, generation, count) VALUES (?, 1, ?)
     ON CONFLICT (scope) DO UPDATE SET generation = generation + 1, count = count + excluded.count`,
  ).run(scope, delta);
}

/** The (id, incarnation) columns of one relation: NULLs when the incarnation is unset. */
function relatedOrNull(id: string, incarnation: string): [string | null, string | null] {
  return incarnation === "" ? [null, null] : [id, incarnation];
}

/**
 * Upserts a lineage record exactly as given (state and deletion time
 * included), with its three related (id, incarnation) columns.
 */
export function upsertLineage(db: Database.Database, r: LineageRecord): void {
  const rel = r.relationship;
  statement(
    db,
    `INSERT INTO session_lineage (session_id, incarnation, kind, relationship, parent_session_id, parent_incarnation, origin_session_id, origin_incarnation,
                                  debug_target_session_id, debug_target_incarnation, owner_scope, state, deleted_us)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT (session_id, incarnation) DO UPDATE SET
       kind = excluded.kind, relationship = excluded.relationship,
       parent_session_id = excluded.parent_session_id, parent_incarnation = excluded.parent_incarnation,
       origin_session_id = excluded.origin_session_id, origin_incarnation = excluded.origin_incarnation,
       debug_target_session_id = excluded.debug_target_session_id, debug_target_incarnation = excluded.debug_target_incarnation,
       owner_scope = excluded.owner_scope, state = excluded.state, deleted_us = excluded.deleted_us`,
  ).run(
    r.sessionId,
    r.incarnation,
    r.kind,
    JSON.stringify(rel),
    ...relatedOrNull(rel.parentSessionId, rel.parentIncarnation),
    ...relatedOrNull(rel.originSessionId, rel.originIncarnation),
    ...relatedOrNull(rel.debugTargetSessionId, rel.debugTargetIncarnation),
    Buffer.from(r.ownerScope),
    r.state,
    r.deletedAtMicros ?? null,
  );
}

/** Upserts the retained lineage record of the projected incarnation. */
function putLineage(db: Database.Database, sessionId: string, projection: SessionProjection): void {
  const m = projection.metadata!;
  upsertLineage(db, { sessionId, incarnation: m.incarnation, kind: m.kind, relationship: m.relationship, ownerScope: m.ownerScope, state: "retained", deletedAtMicros: undefined });
}

function pruneLineage(db: Database.Database, sessionId: string, incarnation: string, nowMicros: number): void {
  statement(db, `UPDATE session_lineage SET state = 'pruned', deleted_us = ? WHERE session_id = ? AND incarnation = ? AND state = 'retained'`).run(nowMicros, sessionId, incarnation);
}

interface CurrentRow {
  owner_scope: string | null;
  incarnation: string | null;
}

function currentRow(db: Database.Database, sessionId: string): CurrentRow | undefined {
  return statement<[string], CurrentRow>(db, `SELECT owner_scope, incarnation FROM session_metadata WHERE session_id = ?`).get(sessionId);
}

/**
 * Writes the metadata row, lineage records and scope counters of a snapshot
 * just stored under `sessionId` at `modifiedMicros` (spec/session-metadata.md
 * section 5.2). Runs inside the caller's transaction, after the `sessions`
 * row was written.
 */
export function writeProjection(db: Database.Database, sessionId: string, modifiedMicros: number, projection: SessionProjection): void {
  const before = currentRow(db, sessionId);
  const m = projection.metadata;
  const owner = ownerScopeHex(m);
  bumpScope(db, ALL, before === undefined ? 1 : 0);
  if (before?.owner_scope != null) bumpScope(db, ownerScopeKey(before.owner_scope), before.owner_scope === owner ? 0 : -1);
  if (owner !== undefined && owner !== before?.owner_scope) bumpScope(db, ownerScopeKey(owner), 1);
  statement(
    db,
    `INSERT INTO session_metadata (session_id, modified_us, owner_scope, incarnation, estimated_bytes, activity_state, metadata) VALUES (?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT (session_id) DO UPDATE SET modified_us = excluded.modified_us, owner_scope = excluded.owner_scope, incarnation = excluded.incarnation,
       estimated_bytes = excluded.estimated_bytes, activity_state = excluded.activity_state, metadata = excluded.metadata`,
  ).run(sessionId, modifiedMicros, owner ?? null, m?.incarnation ?? null, projection.estimatedBytes, projection.activityState, m === undefined ? null : encodeMetadata(m));
  if (before?.incarnation != null && before.incarnation !== m?.incarnation) pruneLineage(db, sessionId, before.incarnation, modifiedMicros);
  if (m !== undefined) putLineage(db, sessionId, projection);
}

/**
 * Removes the metadata row of a session being deleted, prunes its current
 * lineage record (kept forever) and updates the scope counters. Does nothing
 * for an id without a row.
 */
export function removeProjection(db: Database.Database, sessionId: string, nowMicros: number): void {
  const before = currentRow(db, sessionId);
  if (before === undefined) return;
  bumpScope(db, ALL, -1);
  if (before.owner_scope !== null) bumpScope(db, ownerScopeKey(before.owner_scope), -1);
  statement(db, `DELETE FROM session_metadata WHERE session_id = ?`).run(sessionId);
  if (before.incarnation !== null) pruneLineage(db, sessionId, before.incarnation, nowMicros);
}

/** The store's random id (see {@link metadataMigration}). */
function storeId(db: Database.Database): string {
  return statement<[], { value: string }>(db, `SELECT value FROM session_store_info WHERE key = 'store_id'`).get()!.value;
}

interface MetadataDbRow {
  session_id: string;
  modified_us: number;
  estimated_bytes: number;
  activity_state: string;
  metadata: string | null;
}

function toMetadataRow(r: MetadataDbRow): MetadataRow {
  return {
    sessionId: r.session_id,
    modifiedAtMicros: r.modified_us,
    metadata: r.metadata === null ? undefined : decodeMetadata(r.metadata),
    activityState: r.activity_state as ActivityState,
    estimatedBytes: r.estimated_bytes,
  };
}

const ROW_COLUMNS = "session_id, modified_us, estimated_bytes, activity_state, metadata";

/**
 * One PageMetadata page (spec/session-metadata.md section 4) in one read
 * transaction: the scope's generation and count, then at most `limit + 1`
 * rows from the page index (the extra row only tells whether more follow).
 */
export function readMetadataPage(db: Database.Database, q: MetadataPageQuery): MetadataPageAnswer {
  return db.transaction((): MetadataPageAnswer => {
    const scope = q.scope.kind === "all" ? ALL : ownerScopeKey(q.scope.ownerScopeHex);
    const s = statement<[string], { generation: number; count: number }>(db, `SELECT generation, count FROM session_scopes WHERE scope = ?`).get(scope);
    const generation = `${storeId(db)}.${s?.generation ?? 0}`;
    if (q.generation !== undefined && q.generation !== generation) return { restart: true };
    const owner = q.scope.kind === "owner" ? q.scope.ownerScopeHex : undefined;
    const filter = owner === undefined ? "" : "owner_scope = ? AND ";
    const ownerArg = owner === undefined ? [] : [owner];
    const want = q.limit + 1;
    const rows: MetadataDbRow[] = [];
    const tie = q.after?.tie;
    if (tie !== undefined) {
      rows.push(
        ...statement<unknown[], MetadataDbRow>(db, `SELECT ${ROW_COLUMNS} FROM session_metadata WHERE ${filter}modified_us = ? AND session_id > ? ORDER BY session_id LIMIT ?`)
          .all(...ownerArg, tie.micros, tie.sessionId, want),
      );
    }
    if (rows.length < want) {
      rows.push(
        ...statement<unknown[], MetadataDbRow>(db, `SELECT ${ROW_COLUMNS} FROM session_metadata WHERE ${filter}modified_us < ? ORDER BY modified_us DESC, session_id LIMIT ?`)
          .all(...ownerArg, q.after?.beforeMicros ?? Number.MAX_SAFE_INTEGER, want - rows.length),
      );
    }
    return { restart: false, rows: rows.slice(0, q.limit).map(toMetadataRow), more: rows.length > q.limit, total: s?.count ?? 0, generation };
  })();
}

/** A `session_lineage` row as {@link LINEAGE_COLUMNS} reads it. */
export interface LineageDbRow {
  session_id: string;
  incarnation: string;
  kind: string;
  relationship: string;
  owner_scope: Buffer;
  state: string;
  deleted_us: number | null;
}

/** A `session_lineage` row as a {@link LineageRecord}. */
export function toLineageRecord(r: LineageDbRow): LineageRecord {
  const rel = JSON.parse(r.relationship) as SessionRelationship;
  return {
    sessionId: r.session_id,
    incarnation: r.incarnation,
    kind: r.kind,
    relationship: { ...rel, branchIndex: rel.branchIndex ?? undefined },
    ownerScope: r.owner_scope,
    state: r.state as "retained" | "pruned",
    deletedAtMicros: r.deleted_us ?? undefined,
  };
}

/** The columns of `session_lineage` a {@link LineageDbRow} holds. */
export const LINEAGE_COLUMNS = "session_id, incarnation, kind, relationship, owner_scope, state, deleted_us";
const DIRECTLY_RELATED = `((parent_session_id = :root AND parent_incarnation = :inc) OR (origin_session_id = :root AND origin_incarnation = :inc)
  OR (debug_target_session_id = :root AND debug_target_incarnation = :inc))`;

/**
 * ReadLineage (spec/session-metadata.md section 5.3). Full read: every record
 * of the root id, plus every record directly related to the root
 * incarnation, ordered root first, then id, retained before pruned, then
 * incarnation (all byte-wise), cut to the limit. Exact read: the selected
 * record if it is directly related, else nothing.
 */
export function readLineage(db: Database.Database, q: LineageQuery): LineageAnswer {
  const params = { root: q.rootSessionId, inc: q.rootIncarnation };
  if (q.record !== undefined) {
    const row = db
      .prepare<[Record<string, string>], LineageDbRow>(`SELECT ${LINEAGE_COLUMNS} FROM session_lineage WHERE session_id = :rid AND incarnation = :rinc AND ${DIRECTLY_RELATED}`)
      .get({ ...params, rid: q.record.sessionId, rinc: q.record.incarnation });
    return { records: row === undefined ? [] : [toLineageRecord(row)], truncated: false };
  }
  const rows = db
    .prepare<[Record<string, string | number>], LineageDbRow>(
      `SELECT * FROM (
         SELECT ${LINEAGE_COLUMNS} FROM session_lineage WHERE session_id = :root
         UNION SELECT ${LINEAGE_COLUMNS} FROM session_lineage WHERE parent_session_id = :root AND parent_incarnation = :inc
         UNION SELECT ${LINEAGE_COLUMNS} FROM session_lineage WHERE origin_session_id = :root AND origin_incarnation = :inc
         UNION SELECT ${LINEAGE_COLUMNS} FROM session_lineage WHERE debug_target_session_id = :root AND debug_target_incarnation = :inc)
       ORDER BY session_id <> :root, session_id, state <> 'retained', incarnation
       LIMIT :lim`,
    )
    .all({ ...params, lim: q.limit + 1 });
  return { records: rows.slice(0, q.limit).map(toLineageRecord), truncated: rows.length > q.limit };
}

/**
 * Builds the schema-2 migration. Its `run` step fills the new tables from the
 * sessions a store written by an earlier build already holds: each payload
 * is projected with `project` (the same projection Save uses, deriving
 * activity from `messages`), or stored as a non-sessnap row when it cannot be
 * projected; each sessnap session gets its retained lineage record. The
 * generations start from the counts written here.
 */
export function metadataMigration(project: (sessionId: string, payload: Uint8Array) => SessionProjection): Migration {
  return {
    component: "session-store",
    version: 2,
    sql: SCHEMA_V2,
    run(db) {
      statement(db, `INSERT INTO session_store_info (key, value) VALUES ('store_id', ?)`).run(randomBytes(8).toString("hex"));
      // One payload in memory at a time (the connection cannot write while a query iterates).
      const ids = statement<[], { session_id: string; modified_us: number }>(db, `SELECT session_id, modified_us FROM sessions`).all();
      const payload = statement<[string], { payload: Buffer }>(db, `SELECT payload FROM sessions WHERE session_id = ?`);
      for (const s of ids) writeProjection(db, s.session_id, s.modified_us, project(s.session_id, payload.get(s.session_id)!.payload));
    },
  };
}
