import { Code, ConnectError } from "@connectrpc/connect";
import type { PageSessionMetadataRequest, SessionMetadataCursor } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { principalScopeHash } from "../../common/principal-scope.js";
import { invalidArgument } from "../rpc/errors.js";
import { timestampToNanos } from "../rpc/timestamp.js";
import { floorDiv } from "../json/rfc3339.js";
import type { MetadataBoundary, MetadataPageQuery } from "./store.js";

/**
 * The `continuation` of every cursor this driver mints. Paging is keyset
 * paging on (save time, id); the continuation only tells our cursors from
 * anyone else's (spec/session-metadata.md section 4).
 */
export const CURSOR_CONTINUATION = "mecatl-drivers-keyset-v1";

/**
 * The rows a request may see, as the cursor `scope` names them
 * (spec/session-metadata.md section 3.2): `all` when ownership is not
 * enforced; `owner:none` when it is but no owner is given (no row matches);
 * otherwise `owner:` + the lowercase hex of the owner's principal scope hash.
 * `query` is what the store reads, undefined for `owner:none`.
 */
export interface PagingScope {
  name: string;
  query: MetadataPageQuery["scope"] | undefined;
}

/**
 * The scope of a PageMetadata request. An owner is given when
 * `owner_issuer` or `owner_subject` is non-empty, as the harness's server
 * decides it; the owner fields are ignored unless `ownership_enforced`.
 */
export function pagingScope(req: PageSessionMetadataRequest): PagingScope {
  if (!req.ownershipEnforced) return { name: "all", query: { kind: "all" } };
  if (req.ownerIssuer === "" && req.ownerSubject === "") return { name: "owner:none", query: undefined };
  const hex = principalScopeHash({ issuer: req.ownerIssuer, subject: req.ownerSubject }).toString("hex");
  return { name: `owner:${hex}`, query: { kind: "owner", ownerScopeHex: hex } };
}

/** Earliest and latest seconds a valid protobuf Timestamp carries (0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z). */
const MIN_SECONDS = -62_135_596_800n;
const MAX_SECONDS = 253_402_300_799n;

/** A request cursor that is well formed: its key as nanoseconds and its three binding strings. */
export interface RequestCursor {
  modifiedAtNanos: bigint;
  sessionId: string;
  generation: string;
  scope: string;
  continuation: string;
}

/**
 * Checks the shape of a request cursor as the harness's server does
 * (spec/session-metadata.md section 4.1): a valid `modified_at`, a non-empty
 * `session_id`, and non-empty `generation`, `scope` and `continuation`.
 *
 * @throws ConnectError INVALID_ARGUMENT naming the cursor field that is missing or malformed.
 */
export function checkRequestCursor(c: SessionMetadataCursor): RequestCursor {
  const ts = c.modifiedAt;
  if (ts === undefined) throw invalidArgument("cursor.modified_at", "is required: a cursor needs a valid key and non-empty generation, scope and continuation");
  if (ts.seconds < MIN_SECONDS || ts.seconds > MAX_SECONDS || ts.nanos < 0 || ts.nanos > 999_999_999) {
    throw invalidArgument("cursor.modified_at", "is not a valid timestamp (years 0001-9999, nanos 0-999999999)");
  }
  for (const [field, value] of [
    ["cursor.session_id", c.sessionId],
    ["cursor.generation", c.generation],
    ["cursor.scope", c.scope],
    ["cursor.continuation", c.continuation],
  ] as const) {
    if (value === "") throw invalidArgument(field, "must not be empty: a cursor needs a valid key and non-empty generation, scope and continuation");
  }
  return { modifiedAtNanos: timestampToNanos(ts), sessionId: c.sessionId, generation: c.generation, scope: c.scope, continuation: c.continuation };
}

/** ABORTED: the client must restart paging from the first page (the harness's cursor-restart sentinel, wire-contract.md section 2.5). */
export function cursorRestart(why: string): ConnectError {
  return new ConnectError(`cursor must restart from the first page: ${why}`, Code.Aborted);
}

/**
 * Checks that a well-formed cursor belongs to this request: minted by this
 * driver and for the same scope. The generation is checked by the store, in
 * the same read as the page.
 *
 * @throws ConnectError ABORTED (restart) for a foreign continuation or another scope.
 */
export function checkCursorBinding(c: RequestCursor, scope: PagingScope): void {
  if (c.continuation !== CURSOR_CONTINUATION) throw cursorRestart("the continuation was not minted by this driver");
  if (c.scope !== scope.name) throw cursorRestart("the cursor was minted for another owner scope");
}

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/**
 * The keyset boundary of a cursor key, in the microseconds rows are stored
 * with, exact at nanosecond precision: a key on a whole microsecond keeps
 * rows of that microsecond whose id sorts after the cursor's; otherwise every
 * row of that microsecond is before the key (row time ns < key ns).
 */
export function boundaryOf(c: RequestCursor): MetadataBoundary {
  const clamp = (us: bigint) => Number(us > MAX_SAFE ? MAX_SAFE : us < -MAX_SAFE ? -MAX_SAFE : us);
  const floorUs = floorDiv(c.modifiedAtNanos, 1000n);
  if (c.modifiedAtNanos % 1000n === 0n) return { beforeMicros: clamp(floorUs), tie: { micros: clamp(floorUs), sessionId: c.sessionId } };
  return { beforeMicros: clamp(floorUs + 1n) };
}
