import { errorChain } from "./error-chain.js";

/**
 * What went wrong when a call failed because the peer does not speak HTTP/2
 * (Node's `ERR_HTTP2_ERROR` "Protocol error", raised when the bytes it sent
 * are no HTTP/2 frames: a Redis port, an HTTP/1 server, a TLS listener
 * dialled in cleartext), in words that name the likely fix; undefined when
 * `err` (or an error in its `cause` chain) is no such failure. grpc-go, which
 * the harness uses, reports it as UNAVAILABLE, and so does errors.ts
 * `classify` with this message (connect-node says INTERNAL, which means a bug).
 */
export function http2HandshakeProblem(err: unknown): string | undefined {
  for (const e of errorChain(err)) {
    if ((e as { code?: unknown }).code === "ERR_HTTP2_ERROR") {
      return `the driver did not answer in HTTP/2 (${e.message}): another program may listen there, the driver serves TLS (give --driver-tls-ca), or it was starting or stopping`;
    }
  }
  return undefined;
}
