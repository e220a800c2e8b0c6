import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { AppendResponseSchema, EventLogService, type AppendRequest, type ReadAfterResponseSchema } from "../../gen/mecatl/driver/v1/event_log_pb.js";
import { errorWithReason, invalidArgument } from "../rpc/errors.js";
import { stringAnswer } from "../rpc/encoded-answer.js";
import { requireFormat, requireId, requireNonEmptyBytes, requirePresent } from "../rpc/validate.js";
import type { FollowHub } from "./follow-hub.js";
import { encodeCursor } from "./cursor.js";
import { delimitedFieldBytes, HARNESS_MESSAGE_BYTES } from "../rpc/message-size.js";
import { MAX_ID_BYTES } from "../../common/id-rules.js";
import { LogError } from "./log-error.js";
import { readAfter, readEvents, type DeliveredRecord } from "./reads.js";
import type { EventLogStore, NewRecord } from "./store.js";
import { lenientUtf8 } from "../../common/verbatim-utf8.js";

/** The only event format the harness writes (wire-contract.md section 3.3). */
export const EVENT_FORMAT = "eventlog-json/1";

/**
 * More bytes than any cursor field takes in an answer (256 KiB): a cursor is
 * the base64 (4 characters per 3 bytes) of a small JSON object holding the
 * session id (at most MAX_ID_BYTES, each byte escaped to at most 6
 * characters), so under 8 bytes per id byte plus a few dozen; twice that.
 */
const CURSOR_BYTES_BOUND = 16 * MAX_ID_BYTES;

/** The longest cursor any record of `sessionId` can carry: a 16-digit position (cursor.ts). */
function longestCursorBytes(sessionId: string): number {
  return encodeCursor(sessionId, "0".repeat(16), Number.MAX_SAFE_INTEGER).length;
}

/**
 * Requires the ReadAfter answer that will carry a record back (kind, the
 * record's event or gap reason of `recordBytes` encoded bytes, its cursor, and
 * `live`) to fit the harness's 64 MiB message limit: an append accepted
 * beyond it could never be read, and every reader would stop before it.
 *
 * @throws ConnectError INVALID_ARGUMENT naming `field`.
 */
function requireReadableRecord(field: string, sessionId: string, kind: "event" | "gap", recordBytes: number, size: number): void {
  const bare = delimitedFieldBytes(kind.length) + recordBytes + 2;
  // Far enough below the limit no cursor can push the answer over it; encoding the longest cursor costs a few µs per Append.
  if (bare + CURSOR_BYTES_BOUND <= HARNESS_MESSAGE_BYTES) return;
  const answer = bare + delimitedFieldBytes(longestCursorBytes(sessionId));
  if (answer > HARNESS_MESSAGE_BYTES) {
    throw invalidArgument(field, `${size} bytes is too large: the ReadAfter answer carrying it would exceed the harness's ${HARNESS_MESSAGE_BYTES}-byte message limit`);
  }
}

/**
 * Checks an Append request: non-blank `session_id`, an `event` with format
 * `eventlog-json/1` and a payload that is a JSON object (one harness event;
 * the Go server wrapper rejects undecodable payloads too, section 8.11). The
 * payload is only parsed to check it; the stored bytes are the received ones.
 *
 * @throws ConnectError INVALID_ARGUMENT naming the field.
 */
function validAppend(req: AppendRequest): { sessionId: string; record: NewRecord } {
  const sessionId = requireId("session_id", req.sessionId);
  const event = requirePresent("event", req.event);
  requireFormat("event.format", event.format, [EVENT_FORMAT]);
  requireNonEmptyBytes("event.payload", event.payload);
  const eventBytes = delimitedFieldBytes(Buffer.byteLength(event.format, "utf8")) + delimitedFieldBytes(event.payload.byteLength);
  requireReadableRecord("event.payload", sessionId, "event", delimitedFieldBytes(eventBytes), event.payload.byteLength);
  let parsed: unknown;
  try {
    // A leading U+FEFF is kept, so a payload starting with one is not JSON (Go's encoding/json, the harness's reader, refuses it too).
    parsed = JSON.parse(lenientUtf8.decode(event.payload));
  } catch {
    throw invalidArgument("event.payload", "is not valid JSON");
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) throw invalidArgument("event.payload", "must be a JSON object (one event)");
  return { sessionId, record: { kind: "event", format: event.format, payload: event.payload } };
}

/**
 * Maps event-log domain failures to their wire status (section 3.7): cursor
 * reasons with `google.rpc.ErrorInfo`, follower limits as RESOURCE_EXHAUSTED
 * with reasons `follow_capacity` / `follow_lagging`, a log replaced under a
 * legacy Read as ABORTED. Anything else passes through (INTERNAL later).
 */
function toWireError(err: unknown): unknown {
  if (!(err instanceof LogError)) return err;
  switch (err.reason) {
    case "cursor_malformed":
      return errorWithReason(Code.InvalidArgument, err.reason, err.message);
    case "cursor_expired":
      return errorWithReason(Code.FailedPrecondition, err.reason, err.message);
    case "follow_capacity":
    case "follow_lagging":
      return errorWithReason(Code.ResourceExhausted, err.reason, err.message);
    case "log_replaced":
      return new ConnectError(err.message, Code.Aborted);
  }
}

function toResponse(d: DeliveredRecord): MessageInitShape<typeof ReadAfterResponseSchema> {
  const r = d.record;
  return r.kind === "event"
    ? { kind: "event", event: { format: r.format, payload: r.payload }, cursor: d.cursor, live: d.live }
    : { kind: "gap", gapReason: r.reason, cursor: d.cursor, live: d.live };
}

/**
 * EventLogService over an {@link EventLogStore} and the process's
 * {@link FollowHub} (wire-contract.md section 3).
 *
 * - Append: durable before OK; returns the `cur/1` cursor after the record.
 *   INVALID_ARGUMENT for a blank `session_id`, missing `event`, a format other
 *   than `eventlog-json/1`, an empty or non-JSON payload, or a payload whose
 *   ReadAfter answer would exceed 64 MiB (the harness's limit).
 * - AppendGap: a gap at the next position (reason may be empty); its cursor.
 *   INVALID_ARGUMENT for a blank `session_id` or a reason too large to read back.
 * - Read: every event in order, gaps skipped, one per message; unknown
 *   session → empty stream.
 * - ReadAfter: section 3.6; INVALID_ARGUMENT for a blank id or negative
 *   `limit`; `cursor_malformed` (INVALID_ARGUMENT), `cursor_expired`
 *   (FAILED_PRECONDITION), `follow_capacity` / `follow_lagging`
 *   (RESOURCE_EXHAUSTED), each with ErrorInfo in domain `mecatl.stacklok.com`.
 */
export function eventLogService(store: EventLogStore, hub: FollowHub): ServiceImpl<typeof EventLogService> {
  return {
    async append(req) {
      const { sessionId, record } = validAppend(req);
      const { generation, position } = await store.append(sessionId, record);
      return stringAnswer(AppendResponseSchema, 1, encodeCursor(sessionId, generation, position));
    },
    async appendGap(req) {
      const sessionId = requireId("session_id", req.sessionId);
      const reasonBytes = Buffer.byteLength(req.reason, "utf8");
      requireReadableRecord("reason", sessionId, "gap", delimitedFieldBytes(reasonBytes), reasonBytes);
      const { generation, position } = await store.append(sessionId, { kind: "gap", reason: req.reason });
      return { cursor: encodeCursor(sessionId, generation, position) };
    },
    async *read(req) {
      const sessionId = requireId("session_id", req.sessionId);
      try {
        for await (const r of readEvents(store, sessionId)) yield { event: { format: r.format, payload: r.payload } };
      } catch (err) {
        throw toWireError(err);
      }
    },
    async *readAfter(req, context) {
      const sessionId = requireId("session_id", req.sessionId);
      if (req.limit < 0) throw invalidArgument("limit", `must not be negative, got ${req.limit}`);
      try {
        for await (const d of readAfter(store, hub, { sessionId, cursor: req.cursor, limit: req.limit, follow: req.follow }, context.signal)) yield toResponse(d);
      } catch (err) {
        throw toWireError(err);
      }
    },
  };
}
