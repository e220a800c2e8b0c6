import { ConnectError, Code } from "@connectrpc/connect";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { StoreFailure } from "../storage/store-failure.js";

/**
 * The ErrorInfo domain the harness trusts (wire-contract.md section 3.7). A
 * reason is only honoured by the client when it arrives with this exact domain.
 */
export const ERROR_DOMAIN = "mecatl.stacklok.com";

/**
 * Builds a ConnectError that carries a `google.rpc.ErrorInfo{reason, domain}`
 * detail, sent in the `grpc-status-details-bin` trailer (section 3.7).
 *
 * @param code gRPC status code, e.g. `Code.InvalidArgument` for `cursor_malformed`.
 * @param reason lower-case reason string such as `cursor_expired` or `follow_lagging`.
 * @param message human-readable text; never includes payloads or secrets.
 */
export function errorWithReason(code: Code, reason: string, message: string): ConnectError {
  return new ConnectError(message, code, undefined, [
    { desc: ErrorInfoSchema, value: { reason, domain: ERROR_DOMAIN } },
  ]);
}

/**
 * INVALID_ARGUMENT naming the offending request field (docs/DESIGN.md principle 6).
 *
 * @param field the proto field path, e.g. `snapshot.payload`.
 * @param problem what is wrong with it, e.g. `must not be empty`.
 */
export function invalidArgument(field: string, problem: string): ConnectError {
  return new ConnectError(`${field}: ${problem}`, Code.InvalidArgument);
}

/** NOT_FOUND with a message naming the missing key (wire-contract.md section 1). */
export function notFound(message: string): ConnectError {
  return new ConnectError(message, Code.NotFound);
}

/**
 * Turns any error thrown by a store into the ConnectError sent to the client.
 * ConnectErrors pass through; abort errors become CANCELLED; a
 * {@link StoreFailure} becomes RESOURCE_EXHAUSTED (`disk_full`) or
 * UNAVAILABLE (every other kind) with its message, so the caller can tell an
 * outage from a bug (issue 9); anything else is INTERNAL with a generic
 * message (the cause is kept for logging only), as the shared status
 * vocabulary of wire-contract.md section 1 requires.
 */
export function toConnectError(err: unknown): ConnectError {
  if (err instanceof ConnectError) return err;
  if (err instanceof StoreFailure) {
    return new ConnectError(err.message, err.kind === "disk_full" ? Code.ResourceExhausted : Code.Unavailable, undefined, undefined, err);
  }
  if (err instanceof Error && (err.name === "AbortError" || err.name === "TimeoutError")) {
    return new ConnectError("the call was cancelled", Code.Canceled, undefined, undefined, err);
  }
  return new ConnectError("internal storage error", Code.Internal, undefined, undefined, err);
}

/**
 * The reason a call's signal aborts with when its client, or the connection
 * under it, closed the call before it ended: CANCELLED, as gRPC reports a call
 * its client gave up (wire-contract.md section 1). Every way a peer can close
 * a stream counts: a gRPC cancel, an HTTP/2 reset with any error code (a
 * connect-node client resets with INTERNAL_ERROR when its own deadline
 * passes), an HTTP/1.1 connection that closed. Before, the Connect listener
 * passed on connect-node's reading of the reset code, so such a call was
 * counted and logged as an INTERNAL error of the server.
 *
 * @param how what the transport saw, e.g. `http/2 stream closed with error
 *   code INTERNAL_ERROR (0x2)`; kept in the message for the log, never sent.
 */
export function cancelledByClient(how?: string): ConnectError {
  return new ConnectError(how === undefined ? "the client cancelled the call" : `the client cancelled the call (${how})`, Code.Canceled);
}

/**
 * The error a server stream (follow, health Watch) ends with when the server
 * shuts down: UNAVAILABLE, so that its client resumes on another instance
 * (README "Shutdown"; a follow resumes from its last cursor).
 */
export function shuttingDown(): ConnectError {
  return new ConnectError("the server is shutting down; reconnect to another instance (a follow stream resumes from its last cursor)", Code.Unavailable);
}
