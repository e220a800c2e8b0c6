import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import {
  ListSessionsResponseSchema,
  SessionStoreService,
  StoredSessionEntrySchema,
  type PageSessionMetadataRequest,
  type ReadSessionLineageRequest,
  type SaveRequest,
} from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { isValidIncarnation } from "../../common/incarnation.js";
import { encodeAnswer } from "../rpc/answer-budget.js";
import { mapEntries } from "../storage/index-scan.js";
import { invalidArgument, notFound } from "../rpc/errors.js";
import { requireFormat, requireId, requireNonEmptyBytes, requirePresent } from "../rpc/validate.js";
import { microsToTimestamp } from "../rpc/timestamp.js";
import { HARNESS_MESSAGE_BYTES, recordAnswerBytes } from "../rpc/message-size.js";
import { ACTIVITY_STATES, type ActivityState } from "./activity.js";
import { boundaryOf, checkCursorBinding, checkRequestCursor, CURSOR_CONTINUATION, cursorRestart, pagingScope } from "./metadata-cursor.js";
import { loadAnswer } from "./load-answer.js";
import { leadingId, projectSnapshot, SnapshotPayloadError, type SessionProjection } from "./projection.js";
import { ProjectionThreadError, sharedProjectionThread, THREAD_PROJECTION_BYTES, type ProjectionThread } from "./projection-thread.js";
import type { ProjectionSource } from "./projection-source.js";
import { lineageEntry, metadataEntry, metadataEntryBytes } from "./wire-rows.js";
import type { LineageQuery, SessionStore, StoredSnapshot } from "./store.js";
import { spareRequestMemory } from "../../common/spare-payload-memory.js";

/** The contract string the harness requires from Capabilities (wire-contract.md section 2.4). */
export const SESSION_STORE_CONTRACT = "session-store/1";

/** The only snapshot format the Go harness writes (wire-contract.md section 2.3). */
export const SNAPSHOT_FORMAT = "sessnap-json/1";

/** Most lineage records one ReadLineage may ask for (`MaxSessionLineageRecords`, spec/session-metadata.md section 5.3). */
export const MAX_LINEAGE_RECORDS = 256;

/**
 * Most rows one PageMetadata answer carries, whatever `limit` asks: a longer
 * page ends early with a `next_cursor` (docs/DESIGN.md principle 6). The harness
 * reads `next_cursor`, not the row count, to know whether more follow.
 */
export const MAX_PAGE_ROWS = 1000;

/** Most bytes of rows one PageMetadata answer carries (a quarter of the harness's 64 MiB message limit); at least one row is always sent. */
export const MAX_PAGE_BYTES = HARNESS_MESSAGE_BYTES / 4;

/**
 * The call's abort signal for a Save or Create whose payload a store stages
 * in chunks (over {@link THREAD_PROJECTION_BYTES}, as both stores stage it):
 * once the caller has gone (cancelled, or past its deadline) such a Save
 * still waiting for its turn or being staged is given up, nothing written,
 * rather than published seconds after its caller was answered while live
 * Saves wait behind it (a fresh-eyes run: 4 Saves past a 1.5 s deadline
 * were all published 6 s later). Undefined for a smaller payload, which is
 * one write: a small call makes no abort signal.
 */
function callerGone(snapshot: StoredSnapshot, ctx: HandlerContext): AbortSignal | undefined {
  return snapshot.payload.byteLength > THREAD_PROJECTION_BYTES ? ctx.signal : undefined;
}

/**
 * Checks a Save or Create request (wire-contract.md section 2.5; the rules
 * are listed on {@link sessionStoreService}). The projection is not computed
 * here: the answer carries a function computing it, which the store starts
 * as it starts writing and waits for before the write is visible (issue 12).
 * A payload above {@link THREAD_PROJECTION_BYTES} is projected on `thread`,
 * concurrently with its staging; a smaller one inline.
 *
 * A large payload whose first member is an `id` naming another session
 * ({@link leadingId}: what a mismatch looks like in every payload the
 * harness writes) is projected here and now instead, so that it is refused
 * before the store is touched; the projection, not the first look, decides
 * (a later duplicate `id` member wins, as in Go's decoder).
 *
 * @throws ConnectError INVALID_ARGUMENT naming the field, at once for the
 *   request's fields and a large payload whose leading `id` is refused,
 *   and from the returned `projection` for any other payload the projection
 *   refuses (`snapshot.payload`: another `id`, naming both, ...); UNAVAILABLE
 *   from `projection` when the projection worker stopped before answering
 *   (nothing written; a retry starts a new worker).
 */
function validSave(req: SaveRequest, thread: ProjectionThread): { sessionId: string; snapshot: StoredSnapshot; projection: ProjectionSource } {
  const sessionId = requireId("session_id", req.sessionId);
  const snapshot = requirePresent("snapshot", req.snapshot);
  requireFormat("snapshot.format", snapshot.format, [SNAPSHOT_FORMAT]);
  requireNonEmptyBytes("snapshot.payload", snapshot.payload);
  // Load answers {snapshot {format, payload}}; it must fit the harness's 64 MiB limit.
  if (recordAnswerBytes(snapshot.format, snapshot.payload.byteLength) > HARNESS_MESSAGE_BYTES) {
    throw invalidArgument("snapshot.payload", `${snapshot.payload.byteLength} bytes is too large: the Load answer would exceed the harness's ${HARNESS_MESSAGE_BYTES}-byte message limit`);
  }
  if (!(ACTIVITY_STATES as readonly string[]).includes(req.activityState)) {
    throw invalidArgument("activity_state", `must be "draft", "active" or empty, got ${JSON.stringify(req.activityState)}`);
  }
  const payload = snapshot.payload;
  const activity = req.activityState as ActivityState;
  const stored = { format: snapshot.format, payload };
  const inline = (): SessionProjection => {
    try {
      return projectSnapshot(sessionId, payload, activity);
    } catch (err) {
      throw projectionError(err);
    }
  };
  if (payload.byteLength <= THREAD_PROJECTION_BYTES) return { sessionId, snapshot: stored, projection: inline };
  const lead = leadingId(payload);
  if (lead !== undefined && lead !== sessionId) return { sessionId, snapshot: stored, projection: inline() };
  return { sessionId, snapshot: stored, projection: () => thread.project(sessionId, payload, activity).catch((err: unknown) => Promise.reject(projectionError(err))) };
}

/** What a failed projection answers: INVALID_ARGUMENT for a payload it refuses, UNAVAILABLE when its worker stopped, anything else as it is. */
function projectionError(err: unknown): unknown {
  if (err instanceof SnapshotPayloadError) return invalidArgument("snapshot.payload", err.message);
  if (err instanceof ProjectionThreadError) return new ConnectError(err.message, Code.Unavailable, undefined, undefined, err);
  return err;
}

/**
 * Checks a ReadLineage request as the harness's `ValidateSessionLineageQuery`
 * does (spec/session-metadata.md section 5.3).
 *
 * @throws ConnectError INVALID_ARGUMENT naming the field: an empty root id, an
 *   invalid root incarnation, a limit outside 1-256, or a selector that is
 *   half given, names the root, or has an invalid incarnation.
 */
function validLineageQuery(req: ReadSessionLineageRequest): LineageQuery {
  const rootSessionId = requireId("root_session_id", req.rootSessionId);
  if (!isValidIncarnation(req.rootIncarnation)) throw invalidArgument("root_incarnation", `${JSON.stringify(req.rootIncarnation)} is not a valid incarnation id`);
  if (req.limit < 1 || req.limit > MAX_LINEAGE_RECORDS) throw invalidArgument("limit", `must be from 1 to ${MAX_LINEAGE_RECORDS}, got ${req.limit}`);
  const query: LineageQuery = { rootSessionId, rootIncarnation: req.rootIncarnation, limit: req.limit };
  if (req.recordSessionId === "" && req.recordIncarnation === "") return query;
  if (req.recordSessionId === "") throw invalidArgument("record_session_id", "is required with record_incarnation");
  if (req.recordIncarnation === "") throw invalidArgument("record_incarnation", "is required with record_session_id");
  if (req.recordSessionId === rootSessionId) throw invalidArgument("record_session_id", "must differ from root_session_id");
  if (!isValidIncarnation(req.recordIncarnation)) throw invalidArgument("record_incarnation", `${JSON.stringify(req.recordIncarnation)} is not a valid incarnation id`);
  return { ...query, record: { sessionId: req.recordSessionId, incarnation: req.recordIncarnation } };
}

/**
 * PageMetadata (wire-contract.md section 2.5; spec/session-metadata.md
 * sections 3 and 4): validation in the harness's order, then one store read.
 */
async function pageMetadata(store: SessionStore, req: PageSessionMetadataRequest) {
  if (req.limit <= 0) throw invalidArgument("limit", `must be positive, got ${req.limit}`);
  const cursor = req.cursor === undefined ? undefined : checkRequestCursor(req.cursor);
  const scope = pagingScope(req);
  if (cursor !== undefined) checkCursorBinding(cursor, scope);
  if (scope.query === undefined) {
    // Enforced ownership with no owner: nothing is eligible, so no cursor for this scope was ever minted.
    if (cursor !== undefined) throw cursorRestart("no cursor exists for the owner:none scope");
    return { sessions: [], totalCount: 0 };
  }
  const answer = await store.pageMetadata({
    scope: scope.query,
    after: cursor === undefined ? undefined : boundaryOf(cursor),
    limit: Math.min(req.limit, MAX_PAGE_ROWS),
    generation: cursor?.generation,
  });
  if (answer.restart) throw cursorRestart("the sessions in this scope changed since the cursor was minted");
  let rows = answer.rows;
  let bytes = 0;
  const fit = rows.findIndex((r, i) => (bytes += metadataEntryBytes(r)) > MAX_PAGE_BYTES && i > 0);
  if (fit > 0) rows = rows.slice(0, fit);
  const last = rows.at(-1);
  const more = answer.more || rows.length < answer.rows.length;
  if (answer.total > 2 ** 31 - 1) throw new ConnectError(`${answer.total} sessions in scope do not fit total_count (int32)`, Code.Internal);
  return {
    sessions: rows.map(metadataEntry),
    totalCount: answer.total,
    nextCursor:
      more && last !== undefined
        ? { modifiedAt: microsToTimestamp(last.modifiedAtMicros), sessionId: last.sessionId, generation: answer.generation, scope: scope.name, continuation: CURSOR_CONTINUATION }
        : undefined,
  };
}

/**
 * SessionStoreService over a {@link SessionStore} (wire-contract.md section 2;
 * issue 12).
 *
 * - Save: upsert; INVALID_ARGUMENT for a blank `session_id`, missing
 *   `snapshot`, a format other than `sessnap-json/1`, an empty payload, a
 *   payload whose Load answer would exceed 64 MiB (the harness's limit), an
 *   `activity_state` other than `""`/`draft`/`active`, or a sessnap payload
 *   the projection refuses (another `id`, naming both; see projection.ts).
 *   The snapshot, its metadata row, lineage records and activity change
 *   together. A payload over 1 MiB is projected on `thread` while the
 *   store stages it; UNAVAILABLE (nothing written) if that worker stops
 *   before answering.
 * - Create: as Save, but ALREADY_EXISTS (nothing changed, no generation
 *   bumped) when the id exists.
 * - Save and Create over 1 MiB whose caller has gone (cancelled, or past its
 *   deadline) before the payload was published are given up, nothing
 *   written ({@link callerGone}).
 * - Save and Create give a large request's memory back for the next large
 *   request (common/spare-payload-memory.ts `spareRequestMemory`) once the
 *   store has answered: the store resolves only after its projection and
 *   every write that read the payload have finished. After a store failure
 *   the memory is left to the garbage collector (a write cut short by its
 *   deadline may still be reading it).
 * - Load: NOT_FOUND naming the id when absent.
 * - List: every id with its save time, read in bounded pages;
 *   RESOURCE_EXHAUSTED (naming the count and the limit) when the answer would
 *   exceed the harness's 64 MiB message limit (issue 10).
 * - Delete: idempotent; removes the session's event log in the same store
 *   too, and prunes its lineage record.
 * - PageMetadata: INVALID_ARGUMENT for `limit <= 0` or a malformed cursor;
 *   ABORTED for a cursor of another driver, scope or generation.
 * - ReadLineage: INVALID_ARGUMENT for a malformed query (see
 *   {@link validLineageQuery}).
 * - Capabilities: contract `session-store/1`; list, delete, create,
 *   metadata_paging, lineage and activity_projection.
 *
 * @param thread where large payloads are projected (default: the process's
 *   {@link sharedProjectionThread}).
 */
export function sessionStoreService(store: SessionStore, thread: ProjectionThread = sharedProjectionThread()): ServiceImpl<typeof SessionStoreService> {
  return {
    async save(req, ctx) {
      const { sessionId, snapshot, projection } = validSave(req, thread);
      await store.save(sessionId, snapshot, projection, callerGone(snapshot, ctx));
      spareRequestMemory.giveBack(snapshot.payload.buffer);
      return {};
    },
    async create(req, ctx) {
      const { sessionId, snapshot, projection } = validSave(req, thread);
      const created = await store.create(sessionId, snapshot, projection, callerGone(snapshot, ctx));
      spareRequestMemory.giveBack(snapshot.payload.buffer);
      if (!created) {
        throw new ConnectError(`session ${JSON.stringify(sessionId)} already exists`, Code.AlreadyExists);
      }
      return {};
    },
    async load(req) {
      const sessionId = requireId("session_id", req.sessionId);
      const snapshot = await store.load(sessionId);
      if (snapshot === undefined) throw notFound(`session ${JSON.stringify(sessionId)} not found`);
      return loadAnswer(snapshot);
    },
    async list(_req, context) {
      const scan = store.scan();
      const entries = mapEntries(scan, (r) => ({ sessionId: r.sessionId, modifiedAt: microsToTimestamp(r.modifiedAtMicros) }));
      return encodeAnswer(ListSessionsResponseSchema, StoredSessionEntrySchema, entries, { rpc: "List", noun: "sessions", total: () => scan.total() }, context.signal);
    },
    pageMetadata(req) {
      return pageMetadata(store, req);
    },
    async readLineage(req) {
      const answer = await store.readLineage(validLineageQuery(req));
      return { records: answer.records.map(lineageEntry), truncated: answer.truncated };
    },
    async delete(req) {
      await store.delete(requireId("session_id", req.sessionId));
      return {};
    },
    capabilities() {
      return {
        contract: SESSION_STORE_CONTRACT,
        list: true,
        delete: true,
        create: true,
        metadataPaging: true,
        lineage: true,
        activityProjection: true,
      };
    },
  };
}
