import { constants, type Http2ServerRequest } from "node:http2";
import type { IncomingMessage } from "node:http";

/** Bytes of request body read and dropped after an answer, at most: the largest message (65 MiB) and its framing. */
const DISCARD_LIMIT_BYTES = 66 * 1024 * 1024;

/**
 * On the Connect listener, once the answer to `req` is written while its
 * body is still arriving (a call refused before its request arrived whole:
 * over the in-flight budget, past its deadline), the rest of the body is read
 * and dropped, holding nothing, so that the client can finish sending and
 * read the answer. Reading it stops, and the stream is reset with NO_ERROR
 * (HTTP/2) or the connection closed (HTTP/1.1), after
 * {@link DISCARD_LIMIT_BYTES} or when `idleMs` pass without a byte.
 *
 * Before, the HTTP/2 stream was reset at once, as the gRPC listener does: a
 * connect-node client still writing its body then failed `Unknown: Premature
 * close` instead of reading the RESOURCE_EXHAUSTED it had been sent, and a
 * gRPC-Web client over HTTP/1.1 waited for its deadline, its body never read
 * (fresh-eyes run). grpc-go, the harness's client, reads the answer either
 * way. Over HTTP/1.1 the dropped body also frees the connection for its next
 * request: connect-node's clients keep it alive and send their next call on
 * it once they have written the refused body.
 *
 * @param idleMs `--request-idle-timeout` in milliseconds.
 */
export function discardUnreadBodyWhenAnswered(req: IncomingMessage | Http2ServerRequest, finished: Promise<void>, idleMs: number): void {
  void finished.then(() => {
    if (req.readableEnded || req.destroyed) return;
    let discarded = 0;
    let idle!: NodeJS.Timeout;
    const stop = () => {
      clearTimeout(idle);
      req.removeListener("data", drop);
      if ("stream" in req) {
        if (!req.stream.closed) req.stream.close(constants.NGHTTP2_NO_ERROR);
      } else req.socket.destroy();
    };
    const drop = (chunk: Buffer) => {
      discarded += chunk.length;
      if (discarded > DISCARD_LIMIT_BYTES) return stop();
      idle.refresh();
    };
    idle = setTimeout(stop, idleMs);
    // A reader of the body that stopped before its end (connect-node's async iterator over a refused request) leaves its
    // "readable" listener behind, and while one is attached resume() does not make the stream flow: nothing was read,
    // and an HTTP/1.1 connection kept alive never reached its next request.
    req.removeAllListeners("readable");
    req.on("data", drop);
    req.once("end", () => clearTimeout(idle));
    req.once("close", () => clearTimeout(idle));
    req.resume();
  });
}
