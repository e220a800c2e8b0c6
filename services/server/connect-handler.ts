import type { IncomingMessage, ServerResponse } from "node:http";
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";
import { ConnectError, createConnectRouter } from "@connectrpc/connect";
import { compressionBrotli, compressionGzip, universalRequestFromNodeRequest, universalResponseToNodeResponse } from "@connectrpc/connect-node";
import { connectAdmission, endWithError, type AdmissionOptions } from "./admission.js";
import { checkedRequest } from "./connect-request-check.js";
import { clientClosedSignal } from "./client-closed-signal.js";
import type { ConnectCalls } from "./connect-calls.js";
import { idleBoundedBody } from "./idle-bounded-body.js";
import { leaveLongConnectDeadlineToClient } from "./long-deadlines.js";
import { readOnlyMethod } from "./read-only-methods.js";
import type { MountedService } from "./service-registry.js";

type AnyRequest = IncomingMessage | Http2ServerRequest;
type AnyResponse = ServerResponse | Http2ServerResponse;

/**
 * The Connect listener's request handler for `mounted` (Connect, gRPC and
 * gRPC-Web protocols, what connect-node's `connectNodeAdapter` serves, with
 * gzip and brotli accepted): admitted by {@link connectAdmission}, with the
 * request body read and the answer written through the call's share of the
 * in-flight budget (connect-call-bytes.ts), so bytes of unknown length and
 * answers are counted as on the gRPC listener, and checked
 * (connect-request-check.ts) so that bytes that are no valid message are
 * INVALID_ARGUMENT naming the field, as on the gRPC listener; a body whose
 * bytes stop coming for `--request-idle-timeout` ends UNAVAILABLE
 * (idle-bounded-body.ts). A deadline beyond a timer's reach sets no
 * timer (long-deadlines.ts). An answer refused by the
 * budget, or any failure after the handler ran, ends the call in its
 * protocol ({@link endWithError}). An unknown path is HTTP 404.
 *
 * A call its client closes (any HTTP/2 reset code) ends CANCELLED
 * (client-closed-signal.ts). Every call is noted in `calls` until its handler has returned and its
 * answer is written (or its client is gone), and a server stream ends
 * UNAVAILABLE when `calls` shuts down (connect-calls.ts).
 *
 * @param maxMessageBytes largest message read or written, in bytes.
 */
export function connectHandler(mounted: readonly MountedService[], admission: AdmissionOptions, maxMessageBytes: number, calls: ConnectCalls): (req: AnyRequest, res: AnyResponse) => void {
  // Answers past the message limit never leave the stores; a write's answer in JSON (base64 bytes) may be a third larger.
  const router = createConnectRouter({ readMaxBytes: maxMessageBytes, writeMaxBytes: 2 * maxMessageBytes, acceptCompression: [compressionGzip, compressionBrotli] });
  for (const m of mounted) router.service(m.desc, m.impl as never);
  const routes = new Map(router.handlers.map((h) => [h.requestPath, { handler: h, read: readOnlyMethod(h.method.name) }]));
  return connectAdmission((req: AnyRequest, res: AnyResponse, bytes, written) => {
    const route = routes.get(req.url?.split("?", 1)[0] ?? "");
    if (route === undefined) {
      res.writeHead(404);
      res.end();
      return;
    }
    const { handler, read } = route;
    const request = universalRequestFromNodeRequest(req, res, undefined, undefined);
    leaveLongConnectDeadlineToClient(request.header);
    // Over HTTP/1.1 a body that stopped coming leaves the connection unusable (its next bytes would be read as this
    // body's): the refusal says "Connection: close" and the connection is closed once it is written.
    const closeHttp1 = "stream" in res ? undefined : () => ((res as ServerResponse).shouldKeepAlive = false);
    const arriving = idleBoundedBody(request.body as AsyncIterable<Uint8Array>, admission.requestIdleMs, closeHttp1);
    const body = checkedRequest(bytes.chargedRequest(arriving), request.header, handler.method.input, maxMessageBytes);
    const call = calls.begin(handler.method.methodKind === "server_streaming");
    // connect-es links the request's signal to the handler's: a client that closes the call ends it CANCELLED
    // whatever its reset code (client-closed-signal.ts), and a stream's shutdown signal ends it UNAVAILABLE.
    const closed = clientClosedSignal(request.signal);
    const signal = call.shutdown === undefined ? closed : AbortSignal.any([closed, call.shutdown]);
    handler({ ...request, body, signal })
      // connect-node 2.1's universalResponseToNodeResponse waits for an "end" event that Node's responses never emit
      // (they emit "finish" and "close"): its promise does not settle once the answer is written, so that counts instead.
      // Before, every Connect call stayed counted as running and SIGTERM waited all of --shutdown-grace (fresh-eyes run).
      .then((answer) => Promise.race([universalResponseToNodeResponse({ ...answer, body: answer.body && bytes.chargedAnswer(answer.body, read) }, res), written]))
      .catch((err: unknown) => endWithError(req, res, ConnectError.from(err)))
      .finally(call.end);
  }, admission);
}
