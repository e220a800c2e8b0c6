import { Code, createClient, type Client, type ConnectError, type Transport } from "@connectrpc/connect";
import { EventLogService, type ReadAfterResponse, type ReadResponse } from "../gen/mecatl/driver/v1/event_log_pb.js";
import { streamCall, unaryCall, requireText, type CallOptions } from "./call.js";
import { CursorExpiredError, CursorMalformedError, InvalidDriverResponseError, InvalidRequestError } from "./errors.js";

/** The event envelope format the harness writes and the only one reads accept (wire-contract.md section 3.3). */
export const EVENT_LOG_FORMAT = "eventlog-json/1";

const SERVICE = "EventLogService";

/** An event read back with ReadAfter: its JSON payload verbatim, and the cursor positioned after it. */
export interface EventRecord {
  kind: "event";
  payload: Uint8Array;
  /** Hand back to ReadAfter to continue strictly after this record. */
  cursor: string;
  /** True when delivered after the follower first reached the tail (section 3.6). */
  live: boolean;
}

/** A gap marker: events were lost at this position; `reason` says why. */
export interface GapRecord {
  kind: "gap";
  reason: string;
  cursor: string;
  live: boolean;
}

/** One record of a ReadAfter stream. */
export type CursorRecord = EventRecord | GapRecord;

/** Options of {@link EventLogClient.readAfter}. */
export interface ReadAfterOptions extends CallOptions {
  /** Start strictly after this cursor; empty or absent = the beginning of the log (never the tail). */
  cursor?: string;
  /** Total records for the whole call, gaps included; 0 or absent = unbounded. Reaching it ends the stream even when following. */
  limit?: number;
  /** Stay open after draining and deliver new records until the signal aborts. */
  follow?: boolean;
}

function bytes(payload: Uint8Array | string): Uint8Array {
  return typeof payload === "string" ? new TextEncoder().encode(payload) : payload;
}

function isJson(payload: Uint8Array): boolean {
  try {
    JSON.parse(Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength).toString("utf8"));
    return true;
  } catch {
    return false;
  }
}

/** The cursor rejections of section 3.7, trusted only with the `mecatl.stacklok.com` domain. */
function cursorErrors(sessionId: string, operation: string) {
  return (err: ConnectError, reason: string | undefined) => {
    if (err.code === Code.InvalidArgument && reason === "cursor_malformed") return new CursorMalformedError(sessionId, operation, err.rawMessage);
    if (err.code === Code.FailedPrecondition && reason === "cursor_expired") return new CursorExpiredError(sessionId, operation, err.rawMessage);
    return undefined;
  };
}

function checkEventPayload(event: { format: string; payload: Uint8Array } | undefined, operation: string, sessionId: string): Uint8Array {
  if (event === undefined) throw new InvalidDriverResponseError(`an event of session ${JSON.stringify(sessionId)} has no event body`, operation);
  if (event.format !== EVENT_LOG_FORMAT) throw new InvalidDriverResponseError(`event of session ${JSON.stringify(sessionId)} has unknown format ${JSON.stringify(event.format)}`, operation);
  if (!isJson(event.payload)) throw new InvalidDriverResponseError(`decode event of session ${JSON.stringify(sessionId)}: the payload is not JSON`, operation);
  return event.payload;
}

/**
 * EventLogService client with the harness's semantics (wire-contract.md
 * sections 3.3 to 3.7).
 *
 * Errors: {@link CursorMalformedError} / {@link CursorExpiredError} only when
 * the ErrorInfo reason comes with domain `mecatl.stacklok.com` (on Append,
 * AppendGap and ReadAfter); {@link UnsupportedError} for UNIMPLEMENTED;
 * {@link InvalidDriverResponseError} for an unknown format or kind, a payload
 * that is not JSON, or an empty cursor (the stream stops there);
 * {@link InfrastructureError} for anything else, carrying the code and
 * trusted reason (e.g. `follow_lagging`).
 */
export class EventLogClient {
  private readonly rpc: Client<typeof EventLogService>;

  constructor(transport: Transport) {
    this.rpc = createClient(EventLogService, transport);
  }

  /**
   * Appends one event (JSON, format `eventlog-json/1`) and returns the cursor
   * positioned after it (empty from a legacy driver). OK means durable.
   *
   * @throws InvalidRequestError, without an RPC, for a blank id or a payload
   *   that is empty or not JSON (the driver would refuse it: section 3.4).
   */
  async append(sessionId: string, payload: Uint8Array | string, options?: CallOptions): Promise<string> {
    const operation = `${SERVICE}/Append`;
    requireText(operation, "session id", sessionId);
    const body = bytes(payload);
    if (body.byteLength === 0 || !isJson(body)) throw new InvalidRequestError("the event payload must be a non-empty JSON document", operation);
    const res = await unaryCall(operation, options, (o) => this.rpc.append({ sessionId, event: { format: EVENT_LOG_FORMAT, payload: body } }, o), cursorErrors(sessionId, operation));
    return res.cursor;
  }

  /** Records a gap marker (events lost here, `reason` why) at the next position and returns its cursor. */
  async appendGap(sessionId: string, reason: string, options?: CallOptions): Promise<string> {
    const operation = `${SERVICE}/AppendGap`;
    requireText(operation, "session id", sessionId);
    const res = await unaryCall(operation, options, (o) => this.rpc.appendGap({ sessionId, reason }, o), cursorErrors(sessionId, operation));
    return res.cursor;
  }

  /**
   * Every event of the session in append order, gaps skipped (legacy Read,
   * section 3.5): each item is one payload. An unknown session is an empty
   * sequence. A mid-stream fault is thrown once after the events before it.
   * Aborting the signal ends the iteration cleanly.
   */
  read(sessionId: string, options?: CallOptions): AsyncGenerator<Uint8Array, void, undefined> {
    const operation = `${SERVICE}/Read`;
    requireText(operation, "session id", sessionId);
    return streamCall(operation, options, (o) => this.rpc.read({ sessionId }, o), (m: ReadResponse) => checkEventPayload(m.event, operation, sessionId));
  }

  /**
   * Records strictly after `options.cursor` (section 3.6), each with the
   * cursor positioned after itself. With `follow` the stream stays open for
   * new appends and ends cleanly when `options.signal` aborts; with `limit`
   * it ends after that many records.
   *
   * @throws (from the iterator) CursorMalformedError, CursorExpiredError
   *   (also while parked on a log that was reset), InvalidDriverResponseError,
   *   InfrastructureError; InvalidRequestError at once for a negative limit.
   */
  readAfter(sessionId: string, options: ReadAfterOptions = {}): AsyncGenerator<CursorRecord, void, undefined> {
    const operation = `${SERVICE}/ReadAfter`;
    requireText(operation, "session id", sessionId);
    const limit = options.limit ?? 0;
    if (!Number.isInteger(limit) || limit < 0 || limit > 2 ** 31 - 1) throw new InvalidRequestError("limit must be a whole number, 0 for unbounded", operation);
    const check = (m: ReadAfterResponse): CursorRecord => {
      if (m.cursor === "") throw new InvalidDriverResponseError(`a ${JSON.stringify(m.kind)} record of session ${JSON.stringify(sessionId)} has an empty cursor`, operation);
      if (m.kind === "event") return { kind: "event", payload: checkEventPayload(m.event, operation, sessionId), cursor: m.cursor, live: m.live };
      if (m.kind === "gap") return { kind: "gap", reason: m.gapReason, cursor: m.cursor, live: m.live };
      throw new InvalidDriverResponseError(`unknown record kind ${JSON.stringify(m.kind)} in session ${JSON.stringify(sessionId)}`, operation);
    };
    return streamCall(
      operation,
      options,
      (o) => this.rpc.readAfter({ sessionId, cursor: options.cursor ?? "", limit, follow: options.follow ?? false }, o),
      check,
      cursorErrors(sessionId, operation),
    );
  }
}
