import * as grpc from "@grpc/grpc-js";

/** A status as a grpc-js server interceptor sends it (grpc-js does not export the type by name). */
export type SentStatus = Parameters<grpc.ServerInterceptingCall["sendStatus"]>[0];

/** The message of a call whose body ended before one whole request message. */
export const NO_WHOLE_MESSAGE = "request: the call carried no whole request message (its body was empty, or ended before the length its message prefix declares)";
/** The message of a call whose body held a second request message. */
export const SECOND_MESSAGE = "request: the call carried more than one request message; this method takes one";

/**
 * The status grpc-js gives a call whose body does not hold exactly one
 * request message, restated as this driver answers every bad request:
 * INVALID_ARGUMENT naming the request (wire-contract.md section 1; README
 * "Fuzzing"). grpc-js ends such a call UNIMPLEMENTED ("Received no request
 * message for server streaming method ..."), even for a unary method. To the
 * harness UNIMPLEMENTED is no bad request: it switches a feature off for the
 * whole process (leasing, section 4.3; event-log cursors, section 3.6; the
 * session store's client, section 2.4). Any other status is returned as is.
 *
 * Seen when the body ends before the length its message prefix declares, or
 * carries no message at all; or carries a second message.
 */
export function framingStatus(status: SentStatus): SentStatus {
  if (status.code !== grpc.status.UNIMPLEMENTED) return status;
  const details = status.details ?? "";
  if (details.startsWith("Received no request message")) {
    return { ...status, code: grpc.status.INVALID_ARGUMENT, details: NO_WHOLE_MESSAGE };
  }
  if (details.startsWith("Received a second request message")) {
    return { ...status, code: grpc.status.INVALID_ARGUMENT, details: SECOND_MESSAGE };
  }
  return status;
}
