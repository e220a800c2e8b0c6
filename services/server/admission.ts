import * as grpc from "@grpc/grpc-js";
import type { Http2ServerRequest, Http2ServerResponse, ServerHttp2Stream } from "node:http2";
import type { IncomingMessage, ServerResponse } from "node:http";
import { Code, ConnectError } from "@connectrpc/connect";
import { Health } from "../../gen/grpc/health/v1/health_pb.js";
import type { TokenFile } from "./auth.js";
import type { InflightBudget } from "./inflight-budget.js";

/** What is checked before a request's body is read. */
export interface AdmissionOptions {
  /** When set, every call but health must carry one of its bearer tokens (wire-contract.md section 6). */
  auth?: TokenFile;
  /** The memory budget request bytes are taken from (`--max-inflight-bytes`). */
  budget: InflightBudget;
}

const HEALTH_PATH = `/${Health.typeName}/`;
/** Bytes of the gRPC message prefix: a flag byte and a 4-byte big-endian length (charged with the request, see {@link grpcAdmission}). */
export const GRPC_PREFIX_BYTES = 5;

/**
 * A grpc-js server interceptor that admits a call before its message is read
 * (issue 10 deliverables 1 and 3):
 *
 * - authentication from the metadata alone: a call without a valid bearer
 *   token ends with UNAUTHENTICATED and its body is never buffered (grpc-js
 *   discards what still arrives); health is open;
 * - the request's bytes are taken from the in-flight budget as soon as the
 *   message's length prefix arrives, before the rest is read: when they do
 *   not fit, reading pauses (HTTP/2 flow control holds the client back) until
 *   there is room, or the call ends with RESOURCE_EXHAUSTED. They are given
 *   back when the call's stream closes.
 *
 * Must be the first interceptor: it reads the HTTP/2 stream grpc-js keeps on
 * its base call (an internal of grpc-js 1.14, pinned in package.json; the
 * budget tests in test/transport/inflight-budget.test.ts fail if it moves).
 */
export function grpcAdmission(options: AdmissionOptions): grpc.ServerInterceptor {
  return (method, call) => {
    if (method.path.startsWith(HEALTH_PATH)) return new grpc.ServerInterceptingCall(call);
    const refuse = (err: ConnectError) => call.sendStatus({ code: err.code as number as grpc.status, details: err.rawMessage });
    return new grpc.ServerInterceptingCall(call, {
      start: (next) =>
        next({
          onReceiveMetadata: (metadata, admit) => {
            const problem = options.auth?.problem(metadata.get("authorization")[0] as string | undefined);
            if (problem !== undefined) return refuse(new ConnectError(problem, Code.Unauthenticated));
            const stream = (call as unknown as { stream?: ServerHttp2Stream }).stream;
            if (stream !== undefined) budgetRequest(stream, options.budget, refuse);
            admit(metadata);
          },
        }),
    });
  };
}

/**
 * Takes the bytes of the one request message on `stream` from `budget` once
 * its length prefix has arrived; pauses the stream while waiting for room.
 */
function budgetRequest(stream: ServerHttp2Stream, budget: InflightBudget, refuse: (err: ConnectError) => void): void {
  let prefix: Buffer = Buffer.alloc(0);
  let taken = 0;
  const onData = (chunk: Buffer) => {
    // The prefix nearly always comes whole in the first chunk; join pieces only when it does not.
    prefix = prefix.length === 0 && chunk.length >= GRPC_PREFIX_BYTES ? chunk : Buffer.concat([prefix, chunk.subarray(0, GRPC_PREFIX_BYTES - prefix.length)]);
    if (prefix.length < GRPC_PREFIX_BYTES) return;
    stream.off("data", onData);
    const bytes = GRPC_PREFIX_BYTES + prefix.readUInt32BE(1);
    if (budget.tryTake(bytes)) {
      taken = bytes;
      return;
    }
    stream.pause();
    budget.take(bytes, "request").then(
      () => {
        if (stream.closed) budget.release(bytes);
        else {
          taken = bytes;
          stream.resume();
        }
      },
      refuse,
    );
  };
  stream.prependListener("data", onData);
  stream.once("close", () => {
    stream.off("data", onData);
    if (taken > 0) budget.release(taken);
  });
}

type AnyRequest = IncomingMessage | Http2ServerRequest;
type AnyResponse = ServerResponse | Http2ServerResponse;

/**
 * Wraps the Connect listener's request handler with the same admission as
 * {@link grpcAdmission}: the bearer token is checked from the headers before
 * connect-node reads the body (UNAUTHENTICATED in the caller's protocol:
 * Connect, gRPC or gRPC-Web), health is open, and a request that declares
 * its `content-length` takes that many bytes from the in-flight budget before
 * its body is read (waiting for room, or RESOURCE_EXHAUSTED), given back when
 * the response closes. Bodies of unknown length are bounded only by the
 * message limit.
 */
export function connectAdmission<Req extends AnyRequest, Res extends AnyResponse>(
  handler: (req: Req, res: Res) => void,
  options: AdmissionOptions,
): (req: Req, res: Res) => void {
  return (req, res) => {
    if (req.url?.startsWith(HEALTH_PATH)) return handler(req, res);
    const authorization = req.headers.authorization;
    const problem = options.auth?.problem(Array.isArray(authorization) ? authorization[0] : authorization);
    if (problem !== undefined) return refuseHttp(req, res, new ConnectError(problem, Code.Unauthenticated));
    const declared = Number(req.headers["content-length"]);
    if (!Number.isInteger(declared) || declared <= 0) return handler(req, res);
    const admitted = () => {
      res.once("close", () => options.budget.release(declared));
      handler(req, res);
    };
    if (options.budget.tryTake(declared)) return admitted();
    options.budget.take(declared, "request").then(admitted, (err: ConnectError) => refuseHttp(req, res, err));
  };
}

/** Ends an HTTP request with `err` in the protocol its content type names, without reading its body. */
function refuseHttp(req: AnyRequest, res: AnyResponse, err: ConnectError): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const type = String(req.headers["content-type"] ?? "");
  if (type.startsWith("application/grpc")) {
    // gRPC and gRPC-Web: a trailers-only answer.
    (res as ServerResponse).writeHead(200, { "content-type": type, "grpc-status": String(err.code), "grpc-message": encodeURIComponent(err.rawMessage) });
  } else if (type.startsWith("application/connect+")) {
    // Connect streaming: HTTP 200 and one end-of-stream envelope (flag 0x02) holding the error as JSON.
    const end = Buffer.from(JSON.stringify({ error: { code: connectCodeName(err.code), message: err.rawMessage } }));
    const envelope = Buffer.alloc(5);
    envelope.writeUInt8(0x02, 0);
    envelope.writeUInt32BE(end.length, 1);
    (res as ServerResponse).writeHead(200, { "content-type": type });
    (res as ServerResponse).end(Buffer.concat([envelope, end]));
    return;
  } else {
    // Connect unary: the error as JSON with the HTTP status the Connect protocol gives the code.
    // The unread body is discarded as it arrives (Node drains it after the answer), never buffered.
    (res as ServerResponse).writeHead(err.code === Code.Unauthenticated ? 401 : 429, { "content-type": "application/json" });
    (res as ServerResponse).end(JSON.stringify({ code: connectCodeName(err.code), message: err.rawMessage }));
    return;
  }
  res.end();
}

/** The Connect protocol's name of a code (`unauthenticated`, `resource_exhausted`). */
function connectCodeName(code: Code): string {
  return Code[code].replace(/[A-Z]/g, (c, i: number) => (i === 0 ? c : `_${c}`)).toLowerCase();
}
