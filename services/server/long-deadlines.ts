import type { IncomingHttpHeaders } from "node:http2";
import { MAX_TIMER_MS } from "../../common/timer-limit.js";

/** `grpc-timeout` as the gRPC over HTTP/2 spec writes it (and connect-es reads it): at most 8 digits and a unit. */
export const GRPC_TIMEOUT = /^(\d{1,8})([HMSmun])$/;

/** `grpc-timeout` as grpc-js 1.14 reads it: the spec's form anywhere in the value, spaces allowed before the unit. */
const GRPC_JS_TIMEOUT = /(\d{1,8})\s*([HMSmun])/;

/** Milliseconds in one of each `grpc-timeout` unit: H hours, M minutes, S seconds, m milliseconds, u microseconds, n nanoseconds. */
export const GRPC_TIMEOUT_UNIT_MS: Readonly<Record<string, number>> = { H: 3_600_000, M: 60_000, S: 1_000, m: 1, u: 0.001, n: 0.000_001 };

/** `connect-timeout-ms` as the Connect protocol writes it (and connect-es reads it): at most 10 digits, in milliseconds. */
const CONNECT_TIMEOUT = /^\d{1,10}$/;

/**
 * The milliseconds of a `grpc-timeout` value matched by `pattern` (by
 * default the spec's {@link GRPC_TIMEOUT}), not rounded; undefined when the
 * value does not match.
 */
export function grpcTimeoutMs(value: string, pattern: RegExp = GRPC_TIMEOUT): number | undefined {
  const match = pattern.exec(value);
  return match === null ? undefined : Number(match[1]) * GRPC_TIMEOUT_UNIT_MS[match[2]!]!;
}

/**
 * Removes from an HTTP/2 request's `headers` a `grpc-timeout` longer than
 * {@link MAX_TIMER_MS}, before grpc-js reads it. grpc-js 1.14 counts the
 * timeout in a 32-bit integer: 597 hours or more (a 30-day deadline, say)
 * wrap around, and the call (a follow stream most likely) ended
 * DEADLINE_EXCEEDED within milliseconds of its start. Without the header
 * the call sets no timer on the server, as on the direct unary path
 * (grpc-direct-unary.ts); its client, which holds the deadline, cancels it
 * when it passes (wire-contract.md section 1: the client passes the
 * caller's deadline through).
 */
export function leaveLongGrpcDeadlineToClient(headers: IncomingHttpHeaders): void {
  const value = headers["grpc-timeout"];
  if (typeof value !== "string") return;
  const ms = grpcTimeoutMs(value, GRPC_JS_TIMEOUT);
  if (ms !== undefined && ms > MAX_TIMER_MS) delete headers["grpc-timeout"];
}

/**
 * The same for a request on the Connect listener, whose protocols carry the
 * deadline as `connect-timeout-ms` (Connect) or `grpc-timeout` (gRPC,
 * gRPC-Web): a well-formed one beyond {@link MAX_TIMER_MS} is removed from
 * `header` before connect-es arms its timer, which would fire after 1 ms
 * (connect-es 2.1 passes the timeout to `setTimeout` as it is). Malformed
 * values are left for connect-es to refuse.
 */
export function leaveLongConnectDeadlineToClient(header: Headers): void {
  const connect = header.get("connect-timeout-ms");
  if (connect !== null && CONNECT_TIMEOUT.test(connect) && Number(connect) > MAX_TIMER_MS) header.delete("connect-timeout-ms");
  const grpc = header.get("grpc-timeout");
  const ms = grpc === null ? undefined : grpcTimeoutMs(grpc);
  if (ms !== undefined && ms > MAX_TIMER_MS) header.delete("grpc-timeout");
}
