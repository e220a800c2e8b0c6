import * as grpc from "@grpc/grpc-js";
import { create, isMessage, toBinary, type DescMessage, type DescMethod, type DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, createContextValues, type ContextValues, type HandlerContext } from "@connectrpc/connect";
import { encodeStatusDetails } from "./status-details.js";
import { cancelledByClient, shuttingDown, toConnectError } from "../rpc/errors.js";
import { decodeRequest } from "../rpc/decode-request.js";
import { hasFramingRoom, preEncoded } from "../rpc/encoded-answer.js";
import { frameInPlace } from "./grpc-framed-answers.js";
import type { InflightBudget } from "./inflight-budget.js";
import { readOnlyMethod } from "./read-only-methods.js";
import type { DirectUnaryCall, DirectUnaryPath } from "./grpc-direct-unary.js";

/**
 * A service implementation with loose method types, as the adapter sees it:
 * unary methods return a message (or its init shape), server-streaming
 * methods return an async iterable of them.
 */
export type AnyServiceImpl = Record<string, (request: any, context: HandlerContext) => any>;

/** A unary call, from grpc-js or served directly (grpc-direct-unary.ts). */
type UnaryCall = grpc.ServerUnaryCall<Buffer, Buffer> | DirectUnaryCall;
type GrpcCall = UnaryCall | grpc.ServerWritableStream<Buffer, Buffer>;

/**
 * Mounts a Connect-style service implementation on a grpc-js server
 * (docs/DESIGN.md "Transport": service code is written once as Connect
 * `ServiceImpl`s, and grpc-js serves the gRPC protocol).
 *
 * Requests are decoded with protobuf-es inside the handler so that a request
 * that is not valid protobuf (for example a `string` field holding invalid
 * UTF-8, wire-contract.md section 1) is answered INVALID_ARGUMENT naming the
 * field (decode-request.ts) rather than INTERNAL. Errors become a gRPC
 * status whose trailer carries `grpc-status-details-bin` when the error has
 * details. Only unary and
 * server-streaming methods exist in `mecatl.driver.v1`; other kinds answer
 * UNIMPLEMENTED. Authentication and the request's share of the in-flight
 * budget are settled before the handler runs (admission.ts).
 *
 * The unary path allocates nothing a handler does not ask for (issue 11): the
 * handler context builds its abort signal and header copies on first use.
 *
 * @param streams open server streams, ended together at shutdown.
 * @param budget answers take their encoded bytes from it until the call ends;
 *   an answer that finds no room fails with RESOURCE_EXHAUSTED. Undefined
 *   for health, whose answers (a few bytes) must go out when it is full: a
 *   probe refused for want of memory budget would have the process restarted.
 * @param direct when given, the unary methods are also served by it
 *   (grpc-direct-unary.ts), grpc-js keeping the calls it leaves.
 */
export function mountOnGrpc(server: grpc.Server, service: DescService, impl: AnyServiceImpl, streams: OpenStreams, budget: InflightBudget | undefined, direct?: DirectUnaryPath): void {
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
      const read = readOnlyMethod(method.name);
      direct?.add(definition[method.localName]!.path, { run: (call) => runUnary(service, method, fn, call, budget, read) });
      handlers[method.localName] = (call: grpc.ServerUnaryCall<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>) => {
        void runUnary(service, method, fn, call, budget, read).then(
          (response) => callback(null, response),
          (err: unknown) => callback(toServiceError(err)),
        );
      };
    } else if (serverStreaming) {
      handlers[method.localName] = (call: grpc.ServerWritableStream<Buffer, Buffer>) => {
        void runServerStream(service, method, fn, call, streams, budget);
      };
    }
  }
  server.addService(definition, handlers);
}

/**
 * The server streams open on the gRPC listener. At shutdown
 * ({@link OpenStreams.shutdown}) each one's signal aborts and the stream ends
 * with UNAVAILABLE so the client resumes elsewhere; unary calls are left to
 * finish. One set rather than one shared AbortSignal, so that thousands of
 * followers add no listeners to one emitter (issue 11).
 */
export class OpenStreams {
  private readonly open = new Set<GrpcHandlerContext>();
  private closing = false;

  /** True once {@link shutdown} was called. */
  get shuttingDown(): boolean {
    return this.closing;
  }

  /** Tracks a stream's context until {@link remove}; aborts it at once when shutting down. */
  add(context: GrpcHandlerContext): void {
    if (this.closing) context.abort(shuttingDown());
    else this.open.add(context);
  }

  remove(context: GrpcHandlerContext): void {
    this.open.delete(context);
  }

  /** Aborts every open stream's signal with UNAVAILABLE. */
  shutdown(): void {
    this.closing = true;
    for (const context of this.open) context.abort(shuttingDown());
    this.open.clear();
  }
}

/**
 * The Connect {@link HandlerContext} of one grpc-js call. Cheap to make:
 * the abort signal (aborted when the client cancels, the deadline passes, or
 * {@link OpenStreams} shuts down), the request header copy, the response
 * headers and the context values are built on first use. grpc-js 1.14 emits
 * `cancelled` after every completed call too; that event is ignored once the
 * handler has finished.
 */
class GrpcHandlerContext implements HandlerContext {
  readonly protocolName = "grpc";
  readonly requestMethod = "POST";
  private controller: AbortController | undefined;
  private finished = false;
  private lazy: { requestHeader?: Headers; responseHeader?: Headers; responseTrailer?: Headers; values?: ContextValues } = {};

  constructor(
    readonly service: DescService,
    readonly method: DescMethod,
    private readonly call: GrpcCall,
  ) {}

  get url(): string {
    return `/${this.service.typeName}/${this.method.name}`;
  }

  get signal(): AbortSignal {
    if (this.controller === undefined) {
      this.controller = new AbortController();
      if (this.call.cancelled) this.abort(cancelledByClient());
      else this.call.once("cancelled", () => this.abort(cancelledByClient()));
    }
    return this.controller.signal;
  }

  readonly timeoutMs = (): number | undefined => {
    const deadline = this.call.getDeadline();
    const ms = deadline instanceof Date ? deadline.getTime() : Number(deadline);
    return Number.isFinite(ms) ? Math.max(0, ms - Date.now()) : undefined;
  };

  get requestHeader(): Headers {
    return (this.lazy.requestHeader ??= headersOf(this.call.metadata));
  }

  get responseHeader(): Headers {
    return (this.lazy.responseHeader ??= new Headers());
  }

  get responseTrailer(): Headers {
    return (this.lazy.responseTrailer ??= new Headers());
  }

  get values(): ContextValues {
    return (this.lazy.values ??= createContextValues());
  }

  /** Aborts the signal (if anyone asked for it) unless the handler has finished. */
  abort(reason: ConnectError): void {
    if (this.finished) return;
    if (this.controller === undefined) this.controller = new AbortController();
    this.controller.abort(reason);
  }

  /** The handler has finished: later `cancelled` events are ignored; the signal, if made, aborts (Connect's contract). */
  finish(): void {
    if (this.finished) return;
    this.finished = true;
    this.controller?.abort(new ConnectError("the call has completed", Code.Canceled));
  }
}

function headersOf(metadata: grpc.Metadata): Headers {
  const headers = new Headers();
  for (const [key, value] of Object.entries(metadata.getMap())) {
    if (typeof value === "string") headers.set(key, value);
  }
  return headers;
}

/**
 * Encodes a handler's answer: a message as it is, an init shape through
 * `create` first; an answer built as wire bytes (encoded-answer.ts: List,
 * ListSchedules, DueSchedules, ListFires) is sent as those bytes, uncopied;
 * one encoded in place (a large Load) is framed where it lies
 * (grpc-framed-answers.ts).
 */
function encode(desc: DescMessage, message: unknown): Buffer {
  const encoded = preEncoded(message);
  if (encoded !== undefined) return hasFramingRoom(encoded) ? frameInPlace(encoded) : encoded;
  const bytes = toBinary(desc, isMessage(message, desc) ? message : create(desc, message as never));
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/**
 * Takes an encoded answer's bytes from the budget (a read's large answer
 * waiting briefly for room; any other at once: inflight-budget.ts
 * `takeAnswer`) and gives them back when the call ends (a grpc-js call emits `cancelled`
 * once the status is sent, or when the client goes away; a direct one,
 * grpc-direct-unary.ts, once its stream closes).
 *
 * @throws ConnectError RESOURCE_EXHAUSTED when no room was made in time for a read's large answer.
 */
async function budgetAnswer(call: UnaryCall, budget: InflightBudget | undefined, answer: Buffer, read: boolean): Promise<Buffer> {
  if (budget === undefined) return answer;
  await budget.takeAnswer(answer.length, read);
  if (call.cancelled) budget.release(answer.length);
  else call.once("cancelled", () => budget.release(answer.length));
  return answer;
}

async function runUnary(
  service: DescService,
  method: DescMethod,
  fn: AnyServiceImpl[string] | undefined,
  call: UnaryCall,
  budget: InflightBudget | undefined,
  read: boolean,
): Promise<Buffer> {
  // Unary calls are not cut short by shutdown: they get the grace period.
  const context = new GrpcHandlerContext(service, method, call);
  try {
    if (fn === undefined) throw new ConnectError(`${method.name} is not implemented`, Code.Unimplemented);
    const response = await fn(decodeRequest(method.input, call.request), context);
    return await budgetAnswer(call, budget, encode(method.output, response), read);
  } finally {
    context.finish();
  }
}

async function runServerStream(
  service: DescService,
  method: DescMethod,
  fn: AnyServiceImpl[string] | undefined,
  call: grpc.ServerWritableStream<Buffer, Buffer>,
  streams: OpenStreams,
  budget: InflightBudget | undefined,
): Promise<void> {
  const context = new GrpcHandlerContext(service, method, call);
  const signal = context.signal;
  streams.add(context);
  // Answer bytes taken from the budget and not yet handed to HTTP/2; grpc-js
  // never calls a write back once the call is cancelled, so what is left is
  // given back when the stream ends.
  let unsent = 0;
  try {
    if (fn === undefined) throw new ConnectError(`${method.name} is not implemented`, Code.Unimplemented);
    const stream = fn(decodeRequest(method.input, call.request), context) as AsyncIterable<unknown>;
    for await (const message of stream) {
      if (signal.aborted) break;
      const bytes = encode(method.output, message);
      if (budget !== undefined && !budget.tryTake(bytes.length)) await budget.take(bytes.length, "answer");
      unsent += bytes.length;
      const sent = () => {
        if (unsent < bytes.length) return;
        unsent -= bytes.length;
        budget?.release(bytes.length);
      };
      if (!call.write(bytes, sent)) await drained(call, signal);
    }
    if (call.cancelled) return;
    if (streams.shuttingDown) call.emit("error", toServiceError(shuttingDown()));
    else call.end();
  } catch (err) {
    if (call.cancelled) return;
    call.emit("error", toServiceError(streams.shuttingDown ? shuttingDown() : err));
  } finally {
    budget?.release(unsent);
    unsent = 0;
    streams.remove(context);
    context.finish();
  }
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
 * code (Connect codes equal gRPC codes; an error that is not a
 * ConnectError is INTERNAL, rpc/errors.ts), the raw message made
 * well-formed, and trailers with `grpc-status-details-bin` when there are
 * details. The message goes out through `encodeURI`, which throws on a lone
 * UTF-16 surrogate; the throw, inside grpc-js's status sending or the direct
 * path's, would end the process (an unhandled rejection), so each lone
 * surrogate becomes U+FFFD first.
 */
export function toServiceError(err: unknown): Partial<grpc.StatusObject> & { code: grpc.status } {
  const ce = toConnectError(err);
  const metadata = new grpc.Metadata();
  const details = encodeStatusDetails(ce);
  if (details !== undefined) metadata.set("grpc-status-details-bin", Buffer.from(details));
  return { code: ce.code as number as grpc.status, details: wellFormed(ce.rawMessage), metadata };
}

/** `text` with each lone UTF-16 surrogate replaced by U+FFFD (String.prototype.toWellFormed, which Node 20 has but ES2023's types lack). */
function wellFormed(text: string): string {
  return (text as string & { toWellFormed(): string }).toWellFormed();
}
