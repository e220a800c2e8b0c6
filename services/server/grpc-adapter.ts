import * as grpc from "@grpc/grpc-js";
import { create, toBinary, type DescMessage, type DescMethod, type DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, createHandlerContext, type HandlerContext } from "@connectrpc/connect";
import { encodeStatusDetails } from "./status-details.js";
import { toConnectError } from "../rpc/errors.js";
import { decodeRequest } from "../rpc/decode-request.js";

/**
 * A service implementation with loose method types, as the adapter sees it:
 * unary methods return a message (or its init shape), server-streaming
 * methods return an async iterable of them.
 */
export type AnyServiceImpl = Record<string, (request: any, context: HandlerContext) => any>;

/**
 * Mounts a Connect-style service implementation on a grpc-js server
 * (DESIGN.md "Transport": service code is written once as Connect
 * `ServiceImpl`s, and grpc-js serves the gRPC protocol).
 *
 * Requests are decoded with protobuf-es inside the handler so that a request
 * that is not valid protobuf (for example a `string` field holding invalid
 * UTF-8, wire-contract.md section 1) is answered INVALID_ARGUMENT naming the
 * field (decode-request.ts) rather than INTERNAL. Errors become a gRPC
 * status whose trailer carries `grpc-status-details-bin` when the error has
 * details. Only unary and
 * server-streaming methods exist in `mecatl.driver.v1`; other kinds answer
 * UNIMPLEMENTED.
 *
 * @param shutdownSignal when aborted (server shutting down), every open
 *   server stream's `context.signal` aborts and the stream ends with
 *   UNAVAILABLE so the client resumes elsewhere; unary calls are left to finish.
 */
export function mountOnGrpc(server: grpc.Server, service: DescService, impl: AnyServiceImpl, shutdownSignal: AbortSignal): void {
  const definition: Record<string, grpc.MethodDefinition<Buffer, Buffer>> = {};
  const handlers: grpc.UntypedServiceImplementation = {};
  for (const method of service.methods) {
    const serverStreaming = method.methodKind === "server_streaming";
    definition[method.localName] = {
      path: `/${service.typeName}/${method.name}`,
      requestStream: false,
      responseStream: serverStreaming,
      requestSerialize: (b: Buffer) => b,
      requestDeserialize: (b: Buffer) => b,
      responseSerialize: (b: Buffer) => b,
      responseDeserialize: (b: Buffer) => b,
      originalName: method.localName,
    };
    const fn = impl[method.localName];
    if (method.methodKind === "unary") {
      handlers[method.localName] = (call: grpc.ServerUnaryCall<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>) => {
        void runUnary(service, method, fn, call).then(
          (response) => callback(null, response),
          (err: unknown) => callback(toServiceError(err)),
        );
      };
    } else if (serverStreaming) {
      handlers[method.localName] = (call: grpc.ServerWritableStream<Buffer, Buffer>) => {
        void runServerStream(service, method, fn, call, shutdownSignal);
      };
    }
  }
  server.addService(definition, handlers);
}

function handlerContext(service: DescService, method: DescMethod, call: grpc.ServerUnaryCall<Buffer, Buffer> | grpc.ServerWritableStream<Buffer, Buffer>, shutdownSignal: AbortSignal | undefined) {
  const requestAbort = new AbortController();
  call.on("cancelled", () => requestAbort.abort(new ConnectError("the client cancelled the call", Code.Canceled)));
  const deadline = call.getDeadline();
  const deadlineMs = deadline instanceof Date ? deadline.getTime() : Number(deadline);
  const headers = new Headers();
  for (const [key, value] of Object.entries(call.metadata.getMap())) {
    if (typeof value === "string") headers.set(key, value);
  }
  const context = createHandlerContext({
    service,
    method,
    protocolName: "grpc",
    requestMethod: "POST",
    url: `/${service.typeName}/${method.name}`,
    timeoutMs: Number.isFinite(deadlineMs) ? Math.max(0, deadlineMs - Date.now()) : undefined,
    shutdownSignal,
    requestSignal: requestAbort.signal,
    requestHeader: headers,
  });
  return context;
}

function encode(desc: DescMessage, message: unknown): Buffer {
  const bytes = toBinary(desc, create(desc, message as never));
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

async function runUnary(
  service: DescService,
  method: DescMethod,
  fn: AnyServiceImpl[string] | undefined,
  call: grpc.ServerUnaryCall<Buffer, Buffer>,
): Promise<Buffer> {
  // Unary calls are not cut short by shutdown: they get the grace period.
  const context = handlerContext(service, method, call, undefined);
  try {
    if (fn === undefined) throw new ConnectError(`${method.name} is not implemented`, Code.Unimplemented);
    const response = await fn(decodeRequest(method.input, call.request), context);
    return encode(method.output, response);
  } finally {
    context.abort();
  }
}

async function runServerStream(
  service: DescService,
  method: DescMethod,
  fn: AnyServiceImpl[string] | undefined,
  call: grpc.ServerWritableStream<Buffer, Buffer>,
  shutdownSignal: AbortSignal,
): Promise<void> {
  const context = handlerContext(service, method, call, shutdownSignal);
  try {
    if (fn === undefined) throw new ConnectError(`${method.name} is not implemented`, Code.Unimplemented);
    const stream = fn(decodeRequest(method.input, call.request), context) as AsyncIterable<unknown>;
    for await (const message of stream) {
      if (context.signal.aborted) break;
      if (!call.write(encode(method.output, message))) await drained(call, context.signal);
    }
    if (call.cancelled) return;
    if (shutdownSignal.aborted) call.emit("error", toServiceError(shuttingDown()));
    else call.end();
  } catch (err) {
    if (call.cancelled) return;
    call.emit("error", toServiceError(shutdownSignal.aborted ? shuttingDown() : err));
  } finally {
    context.abort();
  }
}

function shuttingDown(): ConnectError {
  return new ConnectError("the server is shutting down; resume from the last cursor on another instance", Code.Unavailable);
}

/** Waits until the stream drains, or the call is cancelled or shut down. */
function drained(call: grpc.ServerWritableStream<Buffer, Buffer>, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      call.off("drain", done);
      signal.removeEventListener("abort", done);
      resolve();
    };
    call.once("drain", done);
    signal.addEventListener("abort", done, { once: true });
  });
}

/**
 * Converts an error into the object grpc-js turns into a status: the numeric
 * code (Connect codes equal gRPC codes), the raw message, and trailers with
 * `grpc-status-details-bin` when there are details.
 */
export function toServiceError(err: unknown): Partial<grpc.StatusObject> & { code: grpc.status } {
  const ce = toConnectError(err);
  const metadata = new grpc.Metadata();
  const details = encodeStatusDetails(ce);
  if (details !== undefined) metadata.set("grpc-status-details-bin", Buffer.from(details));
  return { code: ce.code as number as grpc.status, details: ce.rawMessage, metadata };
}
