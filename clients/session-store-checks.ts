import type { PageSessionMetadataResponse, SessionLineageEntry } from "../gen/mecatl/driver/v1/session_store_pb.js";
import type { Timestamp } from "@bufbuild/protobuf/wkt";
import { compareIdBytes } from "../common/byte-order.js";
import { isValidIncarnation } from "../common/incarnation.js";
import { compareLineage } from "../common/lineage-order.js";
import { directlyRelated, relationshipOf, relationshipProblem } from "../common/session-relationship.js";
import { InvalidDriverResponseError } from "./errors.js";
import { optionalNanos } from "./time.js";

/** Most records one ReadLineage may ask for (`MaxSessionLineageRecords`, wire-contract.md section 2.5). */
export const MAX_LINEAGE_RECORDS = 256;

/**
 * A PageMetadata cursor: the last row's save time (nanoseconds since the
 * epoch) and id, plus the three binding strings the driver minted, opaque to
 * the client and all required (section 2.5).
 */
export interface MetadataCursor {
  modifiedAt: bigint;
  sessionId: string;
  generation: string;
  scope: string;
  continuation: string;
}

/** True when a Timestamp is one Go's `CheckValid` accepts: years 0001-9999, nanos 0-999999999. */
function validTimestamp(ts: Timestamp | undefined): boolean {
  return ts === undefined || (ts.seconds >= -62_135_596_800n && ts.seconds <= 253_402_300_799n && ts.nanos >= 0 && ts.nanos <= 999_999_999);
}

/** Page order: newer save time first, then session id ascending byte-wise. Negative when `a` comes first. */
function pageOrder(a: { at: bigint; id: string }, b: { at: bigint; id: string }): number {
  if (a.at !== b.at) return a.at > b.at ? -1 : 1;
  return compareIdBytes(a.id, b.id);
}

/**
 * Checks a PageMetadata answer against the harness's rules (section 2.5) and
 * returns it with a typed next cursor.
 *
 * @throws InvalidDriverResponseError naming the broken rule.
 */
export function checkMetadataPage(
  limit: number,
  requestCursor: MetadataCursor | undefined,
  owner: { issuer: string; subject: string } | undefined,
  res: PageSessionMetadataResponse,
  operation: string,
): { sessions: PageSessionMetadataResponse["sessions"]; nextCursor?: MetadataCursor; totalCount: number } {
  const bad = (why: string) => new InvalidDriverResponseError(why, operation);
  if (res.sessions.length > limit) throw bad(`${res.sessions.length} rows for a limit of ${limit}`);
  if (res.totalCount < 0 || res.totalCount < res.sessions.length) throw bad(`total_count ${res.totalCount} is below the ${res.sessions.length} rows returned`);
  let previous = requestCursor === undefined ? undefined : { at: requestCursor.modifiedAt, id: requestCursor.sessionId };
  for (const row of res.sessions) {
    if (row.sessionId === "") throw bad("a row has an empty session id");
    if (!validTimestamp(row.modifiedAt) || !validTimestamp(row.createdAt)) throw bad(`row ${JSON.stringify(row.sessionId)} has an invalid timestamp`);
    if (owner !== undefined && !(row.hasOwner && row.ownerIssuer === owner.issuer && row.ownerSubject === owner.subject)) {
      throw bad(`row ${JSON.stringify(row.sessionId)} is outside the requested owner scope`);
    }
    const key = { at: optionalNanos(row.modifiedAt) ?? 0n, id: row.sessionId };
    if (previous !== undefined && pageOrder(previous, key) >= 0) throw bad(`row ${JSON.stringify(row.sessionId)} is out of order or not after the cursor`);
    previous = key;
  }
  const nc = res.nextCursor;
  if (nc === undefined) return { sessions: res.sessions, totalCount: res.totalCount };
  if (nc.generation === "" || nc.scope === "" || nc.continuation === "") throw bad("next_cursor lacks generation, scope or continuation");
  if (nc.modifiedAt === undefined || !validTimestamp(nc.modifiedAt)) throw bad("next_cursor has no valid modified_at");
  const last = res.sessions.at(-1);
  const at = optionalNanos(nc.modifiedAt) ?? 0n;
  if (last === undefined || last.sessionId !== nc.sessionId || (optionalNanos(last.modifiedAt) ?? 0n) !== at) throw bad("next_cursor does not point at the last row");
  return {
    sessions: res.sessions,
    nextCursor: { modifiedAt: at, sessionId: nc.sessionId, generation: nc.generation, scope: nc.scope, continuation: nc.continuation },
    totalCount: res.totalCount,
  };
}

/**
 * Checks a ReadLineage answer as the harness's client does (section 2.5;
 * spec/session-metadata.md section 5.3): at most `limit` records (one and
 * not truncated for an exact query, and then exactly the selected record);
 * every record with a non-empty id, a valid incarnation, a kind and
 * relationship that pass the harness's validation, state `retained` (no
 * `deleted_at`) or `pruned` (with a valid one), a 32-byte owner scope; every
 * record not of the root id directly related to the root incarnation; and the
 * records in order (root first, then id, retained before pruned, then
 * incarnation).
 *
 * @throws InvalidDriverResponseError naming the broken rule.
 */
export function checkLineage(
  req: { rootSessionId: string; rootIncarnation: string; limit: number; record?: { sessionId: string; incarnation: string } },
  records: SessionLineageEntry[],
  truncated: boolean,
  operation: string,
): void {
  const bad = (why: string) => new InvalidDriverResponseError(why, operation);
  if (records.length > req.limit) throw bad(`${records.length} records for a limit of ${req.limit}`);
  if (req.record !== undefined) {
    if (records.length > 1 || truncated) throw bad("an exact lineage query returned more than one record");
    const r = records[0];
    if (r !== undefined && (r.sessionId !== req.record.sessionId || r.incarnation !== req.record.incarnation)) throw bad("the exact lineage query returned another record");
  }
  for (const [i, r] of records.entries()) {
    const name = JSON.stringify(r.sessionId);
    if (r.sessionId === "") throw bad("a lineage record has an empty session id");
    if (!isValidIncarnation(r.incarnation)) throw bad(`record ${name} has an invalid incarnation ${JSON.stringify(r.incarnation)}`);
    const rel = relationshipOf(r);
    const problem = relationshipProblem(r.kind, rel);
    if (problem !== undefined) throw bad(`record ${name}: ${problem}`);
    if (r.state === "retained" && r.deletedAt !== undefined) throw bad(`retained record ${name} has deleted_at`);
    if (r.state === "pruned" && (r.deletedAt === undefined || !validTimestamp(r.deletedAt))) throw bad(`pruned record ${name} lacks a valid deleted_at`);
    if (r.state !== "retained" && r.state !== "pruned") throw bad(`record ${name} has unknown state ${JSON.stringify(r.state)}`);
    if (r.ownerScope.byteLength !== 32) throw bad(`record ${name} has an owner scope of ${r.ownerScope.byteLength} bytes, not 32`);
    if (r.sessionId !== req.rootSessionId && !directlyRelated(rel, req.rootSessionId, req.rootIncarnation)) {
      throw bad(`record ${name} is not directly related to the requested root incarnation`);
    }
    const previous = records[i - 1];
    if (previous !== undefined && compareLineage(req.rootSessionId, previous, r) >= 0) throw bad(`record ${name} is out of order`);
  }
}
