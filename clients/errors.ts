import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorInfoSchema } from "../gen/google/rpc/error_details_pb.js";
import { tlsHandshakeProblem } from "./tls-errors.js";
import { http2HandshakeProblem } from "./http2-errors.js";
import { errorChain } from "./error-chain.js";

/**
 * The ErrorInfo domain the clients trust (wire-contract.md section 3.7): a
 * reason is honoured only when it arrives with exactly this domain.
 */
export const TRUSTED_ERROR_DOMAIN = "mecatl.stacklok.com";

/** Base class of every error the driver clients raise on purpose. `operation` is the RPC, e.g. `EventLogService/ReadAfter`. */
export class DriverError extends Error {
  constructor(
    message: string,
    readonly operation: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** A request the client refuses to send (blank id, empty or non-JSON payload, negative limit, partial cursor): no RPC was issued. */
export class InvalidRequestError extends DriverError {
  override name = "InvalidRequestError";
}

/** Load found no session under `sessionId` (NOT_FOUND; wire-contract.md section 2.5). The message names the id. */
export class SessionNotFoundError extends DriverError {
  override name = "SessionNotFoundError";
  constructor(
    readonly sessionId: string,
    operation: string,
  ) {
    super(`session ${JSON.stringify(sessionId)} not found`, operation);
  }
}

/** Create found `sessionId` already stored (ALREADY_EXISTS; section 2.5); the stored snapshot was not changed. */
export class SessionAlreadyExistsError extends DriverError {
  override name = "SessionAlreadyExistsError";
  constructor(
    readonly sessionId: string,
    operation: string,
  ) {
    super(`session ${JSON.stringify(sessionId)} already exists`, operation);
  }
}

/**
 * Acquire found the lease live and held by another owner, or Renew found it
 * expired, released or taken over (FAILED_PRECONDITION; section 4.3). The
 * harness treats the Renew case as "lease lost".
 */
export class LeaseHeldError extends DriverError {
  override name = "LeaseHeldError";
  constructor(
    readonly sessionId: string,
    operation: string,
    detail: string,
  ) {
    super(`lease on ${JSON.stringify(sessionId)} is held by another owner or was lost: ${detail}`, operation);
  }
}

/**
 * NOT_FOUND from the schedule store (section 5.6): the schedule does not
 * exist, or the slot a Claim/ClaimNow asked for is gone (already claimed,
 * disabled, exhausted, or not due).
 */
export class ScheduleNotFoundError extends DriverError {
  override name = "ScheduleNotFoundError";
  constructor(
    readonly key: string,
    operation: string,
    detail: string,
  ) {
    super(detail, operation);
  }
}

/** LoadFire found no fire record under `fireId` (NOT_FOUND; section 5.5). Also a {@link ScheduleNotFoundError}, as the harness's sentinel is shared. */
export class FireNotFoundError extends ScheduleNotFoundError {
  override name = "FireNotFoundError";
  constructor(
    readonly fireId: string,
    operation: string,
  ) {
    super(fireId, operation, `fire ${JSON.stringify(fireId)} not found`);
  }
}

/** A schedule-state refusal: `scheduleName` and the driver's own words. */
abstract class ScheduleConflictError extends DriverError {
  constructor(
    readonly scheduleName: string,
    operation: string,
    summary: string,
    detail: string,
  ) {
    super(`schedule ${JSON.stringify(scheduleName)} ${summary}: ${detail}`, operation);
  }
}

/** The schedule has a deletion pending (ABORTED; section 5.5), or CompleteScheduleDelete's deletion id did not match. */
export class DeletionPendingError extends ScheduleConflictError {
  override name = "DeletionPendingError";
  constructor(scheduleName: string, operation: string, detail: string) {
    super(scheduleName, operation, "has a deletion pending (or another deletion id)", detail);
  }
}

/** BeginScheduleDelete found a claimed or running fire (FAILED_PRECONDITION; section 5.5). */
export class ActiveFireError extends ScheduleConflictError {
  override name = "ActiveFireError";
  constructor(scheduleName: string, operation: string, detail: string) {
    super(scheduleName, operation, "has an active fire", detail);
  }
}

/** A cursor the driver refused for `sessionId`, with the driver's own words. */
abstract class CursorError extends DriverError {
  constructor(
    readonly sessionId: string,
    operation: string,
    summary: string,
    detail: string,
  ) {
    super(`${summary} event-log cursor for session ${JSON.stringify(sessionId)}: ${detail}`, operation);
  }
}

/**
 * The driver rejected a cursor as not one it issued, undecodable, of another
 * session, or unalignable (INVALID_ARGUMENT with ErrorInfo reason
 * `cursor_malformed`, domain `mecatl.stacklok.com`; section 3.7).
 */
export class CursorMalformedError extends CursorError {
  override name = "CursorMalformedError";
  constructor(sessionId: string, operation: string, detail: string) {
    super(sessionId, operation, "malformed", detail);
  }
}

/**
 * The cursor belongs to a superseded log generation: the log was deleted or
 * reset, possibly while a follower was parked on it (FAILED_PRECONDITION with
 * ErrorInfo reason `cursor_expired`; section 3.7). Read again from the empty
 * cursor.
 */
export class CursorExpiredError extends CursorError {
  override name = "CursorExpiredError";
  constructor(sessionId: string, operation: string, detail: string) {
    super(sessionId, operation, "expired", detail);
  }
}

/**
 * The driver does not offer this operation: UNIMPLEMENTED, or a session-store
 * capability negotiated as false (sections 2.4, 3.7, 4.3, 5.6). For
 * capabilities no RPC was sent; `capability` names it.
 */
export class UnsupportedError extends DriverError {
  override name = "UnsupportedError";
  constructor(
    operation: string,
    detail: string,
    readonly capability?: string,
  ) {
    super(`${operation} is not supported by this driver: ${detail}`, operation);
  }
}

/**
 * Any other failure: a status the client does not map (UNAVAILABLE,
 * INTERNAL, UNAUTHENTICATED, DEADLINE_EXCEEDED from the server...), or a
 * connection error. `code` is the gRPC status; `reason` the ErrorInfo reason
 * when it came with the trusted domain (e.g. `follow_lagging`). The clients
 * never retry (section 1).
 */
export class InfrastructureError extends DriverError {
  override name = "InfrastructureError";
  constructor(
    message: string,
    operation: string,
    readonly code: Code,
    readonly reason?: string,
    options?: { cause?: unknown },
  ) {
    super(message, operation, options);
  }
}

/**
 * The driver answered OK with something the harness would not accept: an
 * unknown format or record kind, a payload that is not JSON, a snapshot,
 * schedule or fire keyed to another id, a missing required field
 * (sections 2.3, 3.3, 3.6, 5.3). `code` is `Code.Internal`.
 */
export class InvalidDriverResponseError extends InfrastructureError {
  override name = "InvalidDriverResponseError";
  constructor(message: string, operation: string, options?: { cause?: unknown }) {
    super(`invalid driver response from ${operation}: ${message}`, operation, Code.Internal, undefined, options);
  }
}

/** The session store's Capabilities answer did not name contract `session-store/1` (section 2.4); the client was not created. */
export class ContractMismatchError extends DriverError {
  override name = "ContractMismatchError";
  constructor(
    readonly contract: string,
    operation: string,
  ) {
    super(`session store driver speaks contract ${JSON.stringify(contract)}, this client needs "session-store/1"`, operation);
  }
}

/** The ErrorInfo reason of `err`, only when its domain is exactly {@link TRUSTED_ERROR_DOMAIN}. */
export function trustedReason(err: ConnectError): string | undefined {
  for (const info of err.findDetails(ErrorInfoSchema)) {
    if (info.domain === TRUSTED_ERROR_DOMAIN) return info.reason;
  }
  return undefined;
}

/** Builds the typed error for one status code, or returns undefined to fall through to {@link InfrastructureError}. */
export type StatusMapper = (err: ConnectError, reason: string | undefined) => Error | undefined;

/** Node error codes meaning the connection or stream to the driver broke under the call. */
const BROKEN_TRANSPORT_CODES = new Set(["ECONNRESET", "EPIPE", "ERR_STREAM_DESTROYED", "ERR_HTTP2_INVALID_STREAM", "ERR_HTTP2_STREAM_ERROR", "ERR_HTTP2_SESSION_ERROR", "ERR_HTTP2_GOAWAY_SESSION"]);

/**
 * True when `ce` did not come from the driver but from the local HTTP/2
 * stack, because the connection or the stream broke under the call (the
 * server process died, a proxy reset the connection, a server shutting down
 * refused a new stream) or could not be opened: connect-node reports these
 * as ABORTED (ECONNRESET, a destroyed stream), CANCELLED (an RST_STREAM with
 * CANCEL) or INTERNAL (an RST_STREAM with REFUSED_STREAM; a failed
 * `connect`, such as ENOENT at a unix: target), where grpc-go, which the harness uses,
 * reports UNAVAILABLE. They are treated as UNAVAILABLE so that a broken connection
 * is never read as a rule's answer (ABORTED means "deletion pending" to the
 * schedule store) and callers can tell an outage (issue 9).
 */
function brokenTransport(ce: ConnectError): boolean {
  if (refusedStream(ce)) return true;
  // A connection that could not be opened: connect-node says UNAVAILABLE only for ECONNREFUSED and name lookups, and
  // INTERNAL for the rest, e.g. ENOENT when no socket file is at a unix: target (a server stopped removes its own).
  if (ce.code === Code.Internal && [...errorChain(ce.cause)].some((e) => (e as { syscall?: unknown }).syscall === "connect")) return true;
  if (ce.code !== Code.Aborted && ce.code !== Code.Canceled) return false;
  if (/^http\/2 stream closed with error code/.test(ce.rawMessage)) return true;
  for (const e of errorChain(ce.cause)) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && BROKEN_TRANSPORT_CODES.has(code)) return true;
  }
  return false;
}

/**
 * True when `err` is the server's refusal of a stream it never processed
 * (RST_STREAM REFUSED_STREAM, RFC 9113 section 8.7: a server closing its
 * connection for `--max-connection-age` or a shutdown refuses the streams
 * that raced its GOAWAY). connect-node reports it as INTERNAL. Such a call
 * can be sent again as it is: nothing of it ran (call.ts does, as grpc-go's
 * transparent retry does for the harness).
 */
export function refusedStream(err: unknown): boolean {
  const ce = ConnectError.from(err);
  return ce.code === Code.Internal && /NGHTTP2_REFUSED_STREAM/.test(ce.rawMessage);
}

/**
 * Turns whatever a call threw into the error the client raises:
 *
 * - when the caller's `signal` is aborted, its reason (an AbortError or
 *   TimeoutError), never an infrastructure error (section 1);
 * - our own typed errors pass through;
 * - a failed TLS handshake, or a peer that does not speak HTTP/2, is
 *   UNAVAILABLE, with a message naming the problem and its fix
 *   (tls-errors.ts, http2-errors.ts), as grpc-go reports it;
 * - a connection or stream that broke under the call is UNAVAILABLE
 *   ({@link brokenTransport});
 * - a ConnectError goes through `map`, then UNIMPLEMENTED becomes
 *   {@link UnsupportedError}, and anything else {@link InfrastructureError}
 *   carrying the code and trusted reason.
 */
export function classify(err: unknown, operation: string, signal: AbortSignal | undefined, map?: StatusMapper): Error {
  if (signal?.aborted) return toAbortReason(signal);
  if (err instanceof DriverError) return err;
  const raw = ConnectError.from(err);
  const handshake = tlsHandshakeProblem(err) ?? http2HandshakeProblem(err);
  const ce =
    handshake !== undefined
      ? new ConnectError(handshake, Code.Unavailable, raw.metadata, undefined, raw)
      : brokenTransport(raw)
        ? new ConnectError(raw.rawMessage, Code.Unavailable, raw.metadata, undefined, raw)
        : raw;
  const reason = trustedReason(ce);
  const mapped = map?.(ce, reason);
  if (mapped !== undefined) return mapped;
  if (ce.code === Code.Unimplemented) return new UnsupportedError(operation, ce.rawMessage);
  const why = reason === undefined ? "" : ` (${reason})`;
  return new InfrastructureError(`${operation} failed: ${Code[ce.code]}${why}: ${ce.rawMessage}`, operation, ce.code, reason, { cause: err });
}

/** The abort reason of an aborted signal as an Error (a DOMException AbortError when the caller gave none). */
export function toAbortReason(signal: AbortSignal): Error {
  const r: unknown = signal.reason;
  return r instanceof Error ? r : new DOMException(String(r ?? "This operation was aborted"), "AbortError");
}
