import { ConnectError } from "@connectrpc/connect";
import { cancelledByClient } from "../rpc/errors.js";

/**
 * A copy of connect-node's signal of one request (aborted when the request's
 * HTTP/2 stream or HTTP/1.1 connection closes) whose reason is always
 * {@link cancelledByClient} (CANCELLED, wire-contract.md section 1), naming
 * what the transport saw. connect-node reads an HTTP/2 reset code into a
 * status of its own: INTERNAL for INTERNAL_ERROR, which connect-node's own
 * client sends when its deadline passes or it is aborted with a reason that
 * is not CANCELLED. A follow or Watch so ended was counted and logged as an
 * INTERNAL error of the server (`"err":"undefined","msg":"internal error"`,
 * found by a fresh-eyes run). The gRPC listener's calls get the same reason
 * (grpc-adapter.ts).
 *
 * One listener on this request's own signal; nothing is added to a shared one.
 */
export function clientClosedSignal(signal: AbortSignal): AbortSignal {
  const controller = new AbortController();
  const restate = () => controller.abort(cancelledByClient(transportSaw(signal.reason)));
  if (signal.aborted) restate();
  else signal.addEventListener("abort", restate, { once: true });
  return controller.signal;
}

function transportSaw(reason: unknown): string | undefined {
  if (reason instanceof ConnectError) return reason.rawMessage;
  if (reason instanceof Error && reason.name !== "AbortError") return reason.message;
  return undefined;
}
