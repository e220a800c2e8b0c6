import * as grpc from "@grpc/grpc-js";
import { constants, type Http2ServerRequest, type Http2ServerResponse, type ServerHttp2Stream } from "node:http2";
import type { IncomingMessage, ServerResponse } from "node:http";
import { Code, ConnectError } from "@connectrpc/connect";
import { codeToHttpStatus, codeToString } from "@connectrpc/connect/protocol-connect";
import { Health } from "../../gen/grpc/health/v1/health_pb.js";
import type { TokenFile } from "./auth.js";
import type { InflightBudget } from "./inflight-budget.js";
import { ConnectCallBytes } from "./connect-call-bytes.js";
import { discardUnreadBodyWhenAnswered } from "./discard-unread-body.js";
import { framingStatus } from "./grpc-framing-status.js";
import { GRPC_PREFIX_BYTES, GrpcRequestWatch } from "./grpc-request-watch.js";

/** What is checked before a request's body is read. */
export interface AdmissionOptions {
  /** When set, every call but health must carry one of its bearer tokens (wire-contract.md section 6). */
  auth?: TokenFile;
  /** The memory budget request bytes are taken from (`--max-inflight-bytes`). */
  budget: InflightBudget;
  /** Largest message accepted, in bytes (a compressed request is checked to decompress to at most this). */
  maxMessageBytes: number;
  /** Milliseconds a request message admitted to the budget may receive no bytes before its call ends UNAVAILABLE (`--request-idle-timeout`; see GrpcRequestWatch). */
  requestIdleMs: number;
}

const HEALTH_PATH = `/${Health.typeName}/`;

/**
 * The largest health request accepted, in bytes (4 KiB): a
 * `HealthCheckRequest` holds one service name. Health is open (no token)
 * and is not charged to the in-flight budget, so that it answers when the
 * budget is full; this limit bounds what a health call can make the server
 * hold instead.
 */
export const HEALTH_REQUEST_BYTES = 4 * 1024;

/**
 * A grpc-js server interceptor that admits a call before its message is read
 * (issue 10 deliverables 1 and 3):
 *
 * - authentication from the metadata alone: a call without a valid bearer
 *   token ends with UNAUTHENTICATED and its body is never buffered (grpc-js
 *   discards what still arrives); health is open, and its requests are not
 *   charged to the budget but limited to {@link HEALTH_REQUEST_BYTES};
 * - the body is watched as it arrives (grpc-request-watch.ts): its bytes
 *   are taken from the in-flight budget once the message's length prefix
 *   arrives (reading pauses while there is no room, or the call ends with
 *   RESOURCE_EXHAUSTED), and framing a client must not send (reserved flags,
 *   a compressed mark without a compression, a message that does not
 *   decompress, bytes after the one message) ends INVALID_ARGUMENT;
 * - a body that does not hold exactly one request message ends
 *   INVALID_ARGUMENT, not grpc-js's UNIMPLEMENTED (grpc-framing-status.ts);
 * - a call answered before its body arrived whole (refused, or past its
 *   deadline) has its stream reset with NO_ERROR once answered
 *   ({@link resetUnreadBodyWhenAnswered}).
 *
 * Must be the first interceptor: it reads the HTTP/2 stream grpc-js keeps on
 * its base call (see GrpcRequestWatch).
 */
export function grpcAdmission(options: AdmissionOptions): grpc.ServerInterceptor {
  return (method, call) => {
    const health = method.path.startsWith(HEALTH_PATH);
    const refuse = (err: ConnectError) => call.sendStatus({ code: err.code as number as grpc.status, details: err.rawMessage });
    let watch: GrpcRequestWatch | undefined;
    return new grpc.ServerInterceptingCall(call, {
      start: (next) =>
        next({
          onReceiveMetadata: (metadata, admit) => {
            // grpc-js keeps the call's grpc-encoding on its base call and removes it from the metadata.
            const { stream, incomingEncoding } = call as unknown as { stream?: ServerHttp2Stream; incomingEncoding?: string };
            // Whatever answers the call (a refusal here or in the watch, grpc-js, the handler), a body still arriving is not read on.
            if (stream !== undefined) resetUnreadBodyWhenAnswered(stream);
            const unauthenticated = health ? undefined : authRefusal(options, metadata.get("authorization")[0] as string | undefined);
            if (unauthenticated !== undefined) return refuse(unauthenticated);
            const encoding = incomingEncoding ?? "identity";
            if (stream !== undefined) watch = new GrpcRequestWatch(
                stream,
                { budget: health ? undefined : options.budget, encoding, maxMessageBytes: health ? HEALTH_REQUEST_BYTES : options.maxMessageBytes, idleMs: options.requestIdleMs },
                refuse,
              );
            admit(metadata);
          },
          onReceiveHalfClose: (next) => {
            const trailing = watch?.trailing();
            if (trailing !== undefined) return refuse(trailing);
            // grpc-js runs the method at the half-close: not before the message's bytes are taken from the budget.
            if (watch === undefined) next();
            else watch.whenAdmitted(next);
          },
        }),
      sendStatus: (status, next) => next(framingStatus(status)),
    });
  };
}

/**
 * The UNAUTHENTICATED refusal of a call whose `authorization` header (the
 * first value) holds no bearer token of `options.auth`, or undefined when it
 * may proceed (no token file, or a valid token). wire-contract.md section 6.
 */
export function authRefusal(options: AdmissionOptions, authorization: string | undefined): ConnectError | undefined {
  const problem = options.auth?.problem(authorization);
  return problem === undefined ? undefined : new ConnectError(problem, Code.Unauthenticated);
}

/**
 * Once the answer on `stream` is written, resets the stream with NO_ERROR
 * if the client is still sending its request body (RFC 9113 section 8.1):
 * the body will not be read, the client stops sending it, and the stream
 * closes even if the client would keep it open, which would otherwise hold
 * the request's bytes in the in-flight budget (grpc-request-watch.ts) and a
 * stream slot for as long as the connection lasts. Only a call answered
 * before its request arrived whole (refused, or past its deadline) has such
 * a body: grpc-js runs a handler once the request has ended.
 */
export function resetUnreadBodyWhenAnswered(stream: ServerHttp2Stream): void {
  stream.once("finish", () => {
    if (!stream.readableEnded && !stream.closed) stream.close(constants.NGHTTP2_NO_ERROR);
  });
}

type AnyRequest = IncomingMessage | Http2ServerRequest;
type AnyResponse = ServerResponse | Http2ServerResponse;

/**
 * Wraps the Connect listener's request handler with the same admission as
 * {@link grpcAdmission}: the bearer token is checked from the headers before
 * the body is read (UNAUTHENTICATED in the caller's protocol: Connect, gRPC
 * or gRPC-Web), health is open, and a request that declares its
 * `content-length` takes that many bytes from the in-flight budget before its
 * body is read (waiting for room, or RESOURCE_EXHAUSTED). A request that
 * asks `Expect: 100-continue` is told to send its body only once admitted, so
 * a refused one is never sent (over HTTP/1.1 its connection is then closed
 * after the refusal: the body it declared will not come). `handler` gets the
 * call's {@link ConnectCallBytes} to charge the rest (a body of unknown
 * length, the answer); all of it is given back once the answer is written
 * or the response closes, whichever comes first ({@link answerWritten},
 * which `handler` gets as `written`). A body still arriving
 * once the answer is written is read and dropped, within bounds
 * (discard-unread-body.ts), so that every client reads its answer.
 */
export function connectAdmission<Req extends AnyRequest, Res extends AnyResponse>(
  handler: (req: Req, res: Res, bytes: ConnectCallBytes, written: Promise<void>) => void,
  options: AdmissionOptions,
): (req: Req, res: Res) => void {
  return (req, res) => {
    const health = req.url?.startsWith(HEALTH_PATH) === true;
    const written = answerWritten(res);
    // A body left unread (a request refused before or midway) is read and dropped once answered, so the client can read the answer.
    discardUnreadBodyWhenAnswered(req, written, options.requestIdleMs);
    const expectsContinue = String(req.headers.expect ?? "").toLowerCase() === "100-continue";
    const admitted = () => {
      if (expectsContinue) res.writeContinue();
      handler(req, res, bytes, written);
    };
    const refused = (err: ConnectError) => {
      // Told no before it sent its body: over HTTP/1.1 the body will not come, so the connection cannot carry another request.
      if (expectsContinue && !("stream" in res)) (res as ServerResponse).shouldKeepAlive = false;
      endWithError(req, res, err);
    };
    if (!health) {
      const authorization = req.headers.authorization;
      const unauthenticated = authRefusal(options, Array.isArray(authorization) ? authorization[0] : authorization);
      if (unauthenticated !== undefined) return refused(unauthenticated);
    }
    // Health is open and never waits for room, as on the gRPC listener: a probe must answer while big calls fill the budget.
    const bytes = new ConnectCallBytes(health ? undefined : options.budget);
    void written.then(() => bytes.end());
    const declared = Number(req.headers["content-length"]);
    if (!Number.isInteger(declared) || declared <= 0) return admitted();
    bytes.reserveRequest(declared).then(admitted, refused);
  };
}

/**
 * Resolves once the answer on `res` is written whole or the response is
 * closed (its client gone), whichever comes first. On HTTP/2 the stream's
 * own "finish" is watched: the response's waits for the stream to close.
 * Once it resolves, the call holds nothing (its bytes are given back), its
 * unread body is dropped (discard-unread-body.ts) and a graceful shutdown
 * need not wait for it (connect-handler.ts). One per call.
 */
function answerWritten(res: AnyResponse): Promise<void> {
  return new Promise((resolve) => {
    ("stream" in res ? res.stream : res).once("finish", resolve);
    res.once("close", resolve);
  });
}

/**
 * Ends an HTTP call with `err` in the protocol its request's content type
 * names, without reading the rest of its body. Before the answer's headers:
 * a trailers-only gRPC answer, a Connect end-of-stream envelope, or a Connect
 * unary error (JSON, the HTTP status the Connect protocol gives the code).
 * After them (a stream refused midway): gRPC trailers, a gRPC-Web trailer
 * frame or a Connect end-of-stream envelope; a Connect unary answer, whose
 * headers go out with its whole body, is cut.
 */
export function endWithError(req: AnyRequest, res: AnyResponse, err: ConnectError): void {
  if (res.writableEnded || res.destroyed) return;
  const out = res as ServerResponse;
  const type = String(req.headers["content-type"] ?? "");
  const grpcStatus = { "grpc-status": String(err.code), "grpc-message": encodeURIComponent(err.rawMessage) };
  if (type.startsWith("application/grpc-web")) {
    if (!res.headersSent) return void out.writeHead(200, { "content-type": type, ...grpcStatus }).end();
    // A trailer frame: flag 0x80, then the trailers as HTTP/1 header lines.
    out.end(envelope(0x80, Buffer.from(Object.entries(grpcStatus).map(([k, v]) => `${k}: ${v}\r\n`).join(""))));
  } else if (type.startsWith("application/grpc")) {
    if (!res.headersSent) return void out.writeHead(200, { "content-type": type, ...grpcStatus }).end();
    out.addTrailers(grpcStatus);
    out.end();
  } else if (type.startsWith("application/connect+")) {
    // Connect streaming: one end-of-stream envelope (flag 0x02) holding the error as JSON.
    if (!res.headersSent) out.writeHead(200, { "content-type": type });
    out.end(envelope(0x02, Buffer.from(JSON.stringify({ error: { code: codeToString(err.code), message: err.rawMessage } }))));
  } else if (!res.headersSent) {
    // Connect unary. The unread body is discarded as it arrives (Node drains it after the answer), never buffered.
    out.writeHead(codeToHttpStatus(err.code), { "content-type": "application/json" });
    out.end(JSON.stringify({ code: codeToString(err.code), message: err.rawMessage }));
  } else {
    res.destroy();
  }
}

/** A message of the gRPC-Web and Connect streaming framings: a flag byte, a 4-byte big-endian length, the bytes. */
function envelope(flags: number, data: Buffer): Buffer {
  const prefix = Buffer.alloc(GRPC_PREFIX_BYTES);
  prefix.writeUInt8(flags, 0);
  prefix.writeUInt32BE(data.length, 1);
  return Buffer.concat([prefix, data]);
}
