import type { PageSessionMetadataResponse, SessionLineageEntry } from "../gen/mecatl/driver/v1/session_store_pb.js";
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

/** Orders two ids byte-wise on their UTF-8 encoding, as Go compares strings. */
export function compareIdBytes(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, "utf8"), Buffer.from(b, "utf8"));
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
  res: PageSessionMetadataResponse,
  operation: string,
): { sessions: PageSessionMetadataResponse["sessions"]; nextCursor?: MetadataCursor; totalCount: number } {
  const bad = (why: string) => new InvalidDriverResponseError(why, operation);
  if (res.sessions.length > limit) throw bad(`${res.sessions.length} rows for a limit of ${limit}`);
  if (res.totalCount < 0 || res.totalCount < res.sessions.length) throw bad(`total_count ${res.totalCount} is below the ${res.sessions.length} rows returned`);
  let previous = requestCursor === undefined ? undefined : { at: requestCursor.modifiedAt, id: requestCursor.sessionId };
  for (const row of res.sessions) {
    if (row.sessionId === "") throw bad("a row has an empty session id");
    const key = { at: optionalNanos(row.modifiedAt) ?? 0n, id: row.sessionId };
    if (previous !== undefined && pageOrder(previous, key) >= 0) throw bad(`row ${JSON.stringify(row.sessionId)} is out of order or not after the cursor`);
    previous = key;
  }
  const nc = res.nextCursor;
  if (nc === undefined) return { sessions: res.sessions, totalCount: res.totalCount };
  if (nc.generation === "" || nc.scope === "" || nc.continuation === "") throw bad("next_cursor lacks generation, scope or continuation");
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
 * Checks a ReadLineage answer (section 2.5): at most `limit` records (one
 * and not truncated for an exact query, and then exactly the selected
 * record), states `retained`/`pruned` with `deleted_at` only on pruned ones,
 * 32-byte owner scopes, non-empty incarnations.
 *
 * @throws InvalidDriverResponseError naming the broken rule.
 */
export function checkLineage(
  req: { limit: number; record?: { sessionId: string; incarnation: string } },
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
  for (const r of records) {
    if (r.sessionId === "" || r.incarnation === "") throw bad("a lineage record lacks its session id or incarnation");
    if (r.state === "retained" && r.deletedAt !== undefined) throw bad(`retained record ${JSON.stringify(r.sessionId)} has deleted_at`);
    if (r.state === "pruned" && r.deletedAt === undefined) throw bad(`pruned record ${JSON.stringify(r.sessionId)} lacks deleted_at`);
    if (r.state !== "retained" && r.state !== "pruned") throw bad(`record ${JSON.stringify(r.sessionId)} has unknown state ${JSON.stringify(r.state)}`);
    if (r.ownerScope.byteLength !== 32) throw bad(`record ${JSON.stringify(r.sessionId)} has an owner scope of ${r.ownerScope.byteLength} bytes, not 32`);
  }
}
