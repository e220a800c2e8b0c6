import * as grpc from "@grpc/grpc-js";
import { constants, type IncomingHttpHeaders, type ServerHttp2Stream } from "node:http2";
import { Code, ConnectError } from "@connectrpc/connect";
import { authRefusal, resetUnreadBodyWhenAnswered, type AdmissionOptions } from "./admission.js";
import { GRPC_PREFIX_BYTES, GrpcRequestWatch } from "./grpc-request-watch.js";
import { joinOnArrival, type JoinerState } from "./grpc-message-joiner.js";
import { NO_WHOLE_MESSAGE, SECOND_MESSAGE } from "./grpc-framing-status.js";
import { answerWritten, framedAnswer } from "./grpc-framed-answers.js";
import { toServiceError } from "./grpc-adapter.js";
import type { Logger } from "./logger.js";
import type { AnswerStallWatch } from "./answer-stall-watch.js";
import { GRPC_TIMEOUT, grpcTimeoutMs, leaveLongGrpcDeadlineToClient } from "./long-deadlines.js";
import { MAX_TIMER_MS } from "../../common/timer-limit.js";

/** One unary method served directly: what its path leads to. */
export interface DirectRoute {
  /**
   * Runs the call: decodes `call.request`, runs the method, and resolves to
   * the answer's bytes (framed or not, grpc-framed-answers.ts) or rejects
   * with the call's error (grpc-adapter.ts `runUnary`).
   */
  run(call: DirectUnaryCall): Promise<Buffer>;
}

/** The headers every answer starts with, a trailers-only one too (gRPC over HTTP/2, "Response-Headers"). */
const RESPONSE_HEADERS = { [constants.HTTP2_HEADER_STATUS]: 200, [constants.HTTP2_HEADER_CONTENT_TYPE]: "application/grpc+proto" };
/** The headers of an answer that carries a message, as grpc-js sends them. */
const ANSWER_HEADERS = { ...RESPONSE_HEADERS, "grpc-accept-encoding": "identity,deflate,gzip", "grpc-encoding": "identity" };
const OK_TRAILERS = { "grpc-status": "0", "grpc-message": "OK" };

/**
 * Serves the unary calls of the driver's services straight from their
 * HTTP/2 stream, in place of grpc-js's per-call machinery (issue 11
 * deliverable 1: a lean unary path). grpc-js 1.14 makes, for every call, a
 * metadata object, a call object with its decoder, a listener chain per
 * interceptor and an event emitter for the handler; skipping them took
 * 15–34 µs of server CPU (12–23 %) off every small call (bench/RESULTS.md).
 * The connection stays grpc-js's: its settings, keepalive, connection age,
 * stream limit and shutdown apply as before; only the handling of one
 * stream moves here.
 *
 * Taken: a POST with content type `application/grpc` or
 * `application/grpc+proto`, no request compression (`grpc-encoding` absent
 * or `identity`), a `grpc-timeout` absent or as the spec writes it, to a
 * path registered with {@link add}. Every other stream (health, server
 * streams, compressed requests, other headers, unknown paths) goes to
 * grpc-js as before. grpc-js's server interceptors (server.ts) do not see
 * the calls taken here; their rules are restated below. The answers match
 * grpc-js's header for header (test/transport/grpc-direct-unary.test.ts
 * sends each kind both ways and compares them).
 *
 * The rules, each as the admission interceptor (admission.ts) or grpc-js
 * applies it:
 * - no valid bearer token: UNAUTHENTICATED, before the body is read
 *   (wire-contract.md section 6);
 * - the body is watched as it arrives (grpc-request-watch.ts): the
 *   in-flight budget is taken at the length prefix (RESOURCE_EXHAUSTED when
 *   no room comes), and framing a client must not send is INVALID_ARGUMENT;
 * - the message is joined as it arrives (grpc-message-joiner.ts); a prefix
 *   over the message limit is RESOURCE_EXHAUSTED
 *   `Received message larger than max (N vs M)`;
 * - a body without exactly one message is INVALID_ARGUMENT
 *   (grpc-framing-status.ts; wire-contract.md section 1: a bad request
 *   changes nothing);
 * - `grpc-timeout`: DEADLINE_EXCEEDED `Deadline exceeded` when it passes,
 *   and the method never runs when it has passed by the time the request is
 *   whole;
 * - a client that resets the stream aborts the handler's signal, and a
 *   method whose request it never finished does not run;
 * - the answer: headers, the one message, then `grpc-status: 0` in
 *   trailers; an answer over the message limit: headers, then
 *   RESOURCE_EXHAUSTED `Sent message larger than max (N vs M)` in trailers;
 *   an error: a trailers-only answer with its code, message and
 *   `grpc-status-details-bin` (grpc-adapter.ts `toServiceError`).
 */
export class DirectUnaryPath {
  private readonly routes = new Map<string, DirectRoute>();

  /**
   * @param logger where a failure to write an answer is logged (never payloads).
   * @param stalls watches every stream of the listener, served here or by grpc-js, for an answer its client stops taking.
   */
  constructor(
    private readonly admission: AdmissionOptions,
    private readonly logger: Logger,
    private readonly stalls?: AnswerStallWatch,
  ) {}

  /** Serves calls to `path` (`/package.Service/Method`) directly from now on. */
  add(path: string, route: DirectRoute): void {
    this.routes.set(path, route);
  }

  /**
   * Puts this path in front of `server`'s stream handling: must be called
   * before the server binds or makes a connection injector. It wraps
   * grpc-js's two stream handlers on this server object, `_streamHandler`
   * and (channelz on) `_channelzHandler`, internals of grpc-js 1.14 pinned in
   * package.json; channelz does not count the calls served here, and the
   * server's interceptors do not see them.
   *
   * @throws Error when grpc-js has no such handlers (an upgrade moved them), or when the server already listens: the server refuses to start.
   */
  install(server: grpc.Server): void {
    const internals = server as unknown as GrpcServerInternals;
    if (typeof internals._streamHandler !== "function" || typeof internals._channelzHandler !== "function" || typeof internals.onStreamOpened !== "function" || !(internals.http2Servers instanceof Map)) {
      throw new Error("grpc-js has no Server._streamHandler, _channelzHandler, onStreamOpened and http2Servers to use (grpc-js was upgraded past 1.14?)");
    }
    // grpc-js binds its handler to each HTTP/2 server as it makes it: one made already would never see this path.
    if (internals.http2Servers.size > 0) throw new Error("the direct unary path must be installed before the gRPC server binds or makes a connection injector");
    internals._streamHandler = this.inFrontOf(internals._streamHandler);
    internals._channelzHandler = this.inFrontOf(internals._channelzHandler);
  }

  /** A stream handler that serves the streams it can and hands the rest to grpc-js's `handler`. */
  private inFrontOf(handler: StreamHandler): StreamHandler {
    const direct = this;
    return function (this: GrpcServerInternals, interceptors, stream, headers) {
      direct.stalls?.watchStream(stream);
      const route = direct.routeFor(headers);
      if (route === undefined) {
        // grpc-js would end a call whose deadline is beyond its 32-bit timer at once (long-deadlines.ts).
        leaveLongGrpcDeadlineToClient(headers);
        return handler.call(this, interceptors, stream, headers);
      }
      // What grpc-js does first for every stream: swallow stream errors (a close follows), count it for the idle timeout.
      stream.once("error", ignore);
      this.onStreamOpened(stream);
      new DirectUnaryCall(stream, headers, direct.admission, direct.logger).serve(route);
    };
  }

  /** The route for a stream whose headers this path can serve, or undefined to leave it to grpc-js. */
  private routeFor(headers: IncomingHttpHeaders): DirectRoute | undefined {
    const route = this.routes.get(headers[constants.HTTP2_HEADER_PATH] as string);
    if (route === undefined || headers[constants.HTTP2_HEADER_METHOD] !== "POST") return undefined;
    const type = headers[constants.HTTP2_HEADER_CONTENT_TYPE];
    if (type !== "application/grpc" && type !== "application/grpc+proto") return undefined;
    const encoding = headers["grpc-encoding"];
    if (encoding !== undefined && encoding !== "identity") return undefined;
    const timeout = headers["grpc-timeout"];
    if (timeout !== undefined && !GRPC_TIMEOUT.test(timeout as string)) return undefined;
    return route;
  }
}

/** What {@link DirectUnaryPath.install} uses of a grpc-js server. */
interface GrpcServerInternals {
  _streamHandler: StreamHandler;
  _channelzHandler: StreamHandler;
  onStreamOpened(stream: ServerHttp2Stream): void;
  http2Servers: Map<unknown, unknown>;
}

/** grpc-js's handler of a new HTTP/2 stream. */
type StreamHandler = (this: GrpcServerInternals, interceptors: unknown, stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => void;

function ignore(): void {}

/**
 * One unary call served by {@link DirectUnaryPath}: it reads the request,
 * runs the route and writes the answer. It offers the handler context
 * (grpc-adapter.ts) what a grpc-js call offers: `request`, `cancelled` and
 * the `cancelled` event (emitted once the stream closes, answered or not),
 * the deadline and the metadata (built on first use).
 */
export class DirectUnaryCall {
  /** The request message's bytes (without its prefix), set once the first message is whole; the route runs only when it was the only one. */
  request: Buffer = EMPTY;
  /** True once the stream has closed (answered, reset by the client, or the connection gone). */
  cancelled = false;
  private answered = false;
  private onCancel: Array<() => void> | undefined;
  private deadlineMs = Infinity;
  private timer: NodeJS.Timeout | undefined;
  private messages = 0;
  private metadataMade: grpc.Metadata | undefined;

  constructor(
    private readonly stream: ServerHttp2Stream,
    private readonly headers: IncomingHttpHeaders,
    private readonly admission: AdmissionOptions,
    private readonly logger: Logger,
  ) {}

  /** The call's metadata: its headers but the pseudo-headers and those of the transport. */
  get metadata(): grpc.Metadata {
    if (this.metadataMade === undefined) {
      this.metadataMade = grpc.Metadata.fromHttp2Headers(this.headers);
      for (const name of TRANSPORT_HEADERS) this.metadataMade.remove(name);
    }
    return this.metadataMade;
  }

  /** The deadline in milliseconds since the epoch, Infinity when the call has none. */
  getDeadline(): number {
    return this.deadlineMs;
  }

  /** Runs `fn` once the call is over (at once if it is). Only `cancelled` exists, as grpc-js's unary call emits it. */
  once(_event: "cancelled", fn: () => void): void {
    if (this.cancelled) fn();
    else (this.onCancel ??= []).push(fn);
  }

  /** Reads the request and, once it is whole, runs `route` and answers. */
  serve(route: DirectRoute): void {
    const stream = this.stream;
    stream.once("close", this.onClose);
    // Whatever answers the call, a body still arriving is not read on (admission.ts).
    resetUnreadBodyWhenAnswered(stream);
    const unauthenticated = authRefusal(this.admission, this.headers.authorization);
    if (unauthenticated !== undefined) return this.fail(unauthenticated);
    const timeout = this.headers["grpc-timeout"] as string | undefined;
    if (timeout !== undefined) this.startDeadline(timeout);
    const watch = new GrpcRequestWatch(
      stream,
      { budget: this.admission.budget, encoding: "identity", maxMessageBytes: this.admission.maxMessageBytes, idleMs: this.admission.requestIdleMs },
      this.fail,
    );
    const joiner: JoinerState = { maxReadMessageLength: this.admission.maxMessageBytes };
    stream.on("data", (chunk: Buffer) => {
      if (this.answered) return;
      let done: Buffer[];
      try {
        done = joinOnArrival.call(joiner, chunk);
      } catch (err) {
        return this.fail(new ConnectError((err as Error).message, Code.ResourceExhausted));
      }
      for (const message of done) {
        if (++this.messages > 1) return this.fail(new ConnectError(SECOND_MESSAGE, Code.InvalidArgument));
        this.request = message.subarray(GRPC_PREFIX_BYTES);
      }
    });
    stream.once("end", () => {
      // Node also ends the readable side of a stream the client reset: such a call is over, and its method must not run.
      if (this.answered || this.gone()) return;
      if (this.messages === 0) return this.fail(new ConnectError(NO_WHOLE_MESSAGE, Code.InvalidArgument));
      const trailing = watch.trailing();
      if (trailing !== undefined) return this.fail(trailing);
      // The method runs once the message's bytes are taken from the budget, not before (grpc-request-watch.ts).
      watch.whenAdmitted(() => {
        if (this.answered || this.gone()) return;
        // A deadline that has passed by now (0n, or a body slower than it) is refused before its timer runs: the method must not run.
        if (Date.now() >= this.deadlineMs) return this.fail(deadlineExceeded());
        // Nothing thrown while answering may reach the process (an unhandled rejection ends it): the stream is reset instead.
        route.run(this).then(this.answer, this.fail).catch(this.broken);
      });
    });
  }

  /**
   * Starts the call's deadline from its `grpc-timeout` (at most 8 digits and
   * a unit: H hours, M minutes, S seconds, m milliseconds, u microseconds, n
   * nanoseconds; checked by {@link DirectUnaryPath} before the call is taken).
   * When it passes the call ends DEADLINE_EXCEEDED; a deadline beyond
   * {@link MAX_TIMER_MS} is kept but sets no timer.
   */
  private startDeadline(timeout: string): void {
    // Whole milliseconds, as grpc-js counts them: below 1 ms (1n, 999u) the deadline has passed on arrival.
    const ms = Math.trunc(grpcTimeoutMs(timeout)!);
    this.deadlineMs = Date.now() + ms;
    if (ms <= MAX_TIMER_MS) this.timer = setTimeout(() => this.fail(deadlineExceeded()), ms);
  }

  /**
   * Writes `bytes` (an answer, framed or not) as the call's one message, then
   * the OK status; an answer over the message limit is not sent, and the
   * call ends RESOURCE_EXHAUSTED in trailers after the answer's headers, as
   * grpc-js ends it.
   */
  private readonly answer = (bytes: Buffer): void => {
    if (this.answered || this.gone()) return;
    const frame = framedAnswer(bytes);
    if (frame.length - GRPC_PREFIX_BYTES > this.admission.maxMessageBytes) {
      // grpc-js sends the answer's headers before it checks the size: the refusal comes in trailers.
      const err = new ConnectError(`Sent message larger than max (${frame.length} vs. ${this.admission.maxMessageBytes})`, Code.ResourceExhausted);
      return this.sendAnswer(undefined, statusTrailers(err));
    }
    this.sendAnswer(frame, OK_TRAILERS);
  };

  /** Sends the answer's headers, `frame` when there is one, then `trailers`. */
  private sendAnswer(frame: Buffer | undefined, trailers: Record<string, string | string[]>): void {
    this.answered = true;
    const stream = this.stream;
    stream.respond(ANSWER_HEADERS, { waitForTrailers: true });
    stream.once("wantTrailers", () => stream.sendTrailers(trailers));
    if (frame !== undefined) {
      stream.write(frame, (err) => {
        if (err == null && !this.gone()) answerWritten(frame);
      });
    }
    stream.end();
  }

  /**
   * Ends the call with `err`'s status in a trailers-only answer, unless it
   * was answered: a ConnectError keeps its code, anything else is INTERNAL
   * (grpc-adapter.ts `toServiceError`).
   */
  private readonly fail = (err: unknown): void => {
    if (this.answered || this.gone()) return;
    this.answered = true;
    this.stream.respond({ ...statusTrailers(err), ...RESPONSE_HEADERS }, { endStream: true });
  };

  /**
   * Logs `err`, thrown while answering (by {@link answer} or {@link fail}:
   * a defect), and resets the stream INTERNAL_ERROR, which the client hears
   * as INTERNAL; the process goes on.
   */
  private readonly broken = (err: unknown): void => {
    this.logger.error({ path: this.headers[constants.HTTP2_HEADER_PATH], err: err instanceof Error ? err.message : String(err) }, "could not answer a call; its stream was reset");
    if (!this.stream.destroyed) this.stream.close(constants.NGHTTP2_INTERNAL_ERROR);
  };

  /** True once the stream can carry nothing more (closed, or destroyed before its close event). */
  private gone(): boolean {
    return this.cancelled || this.stream.destroyed || this.stream.closed;
  }

  /** The stream closed: the call is over; its deadline timer stops and its `cancelled` listeners run. */
  private readonly onClose = (): void => {
    this.cancelled = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    const listeners = this.onCancel;
    this.onCancel = undefined;
    if (listeners !== undefined) for (const fn of listeners) fn();
  };
}

const EMPTY = Buffer.alloc(0);

/** The status of a call past its deadline, in grpc-js's words. */
function deadlineExceeded(): ConnectError {
  return new ConnectError("Deadline exceeded", Code.DeadlineExceeded);
}

/** Headers grpc-js leaves out of a call's metadata. */
const TRANSPORT_HEADERS = ["grpc-timeout", "grpc-encoding", "grpc-accept-encoding", "accept-encoding", "te", "content-type"];

/** `err`'s status as gRPC trailers: its code, its message (URI-encoded, as grpc-js writes it; made well-formed by `toServiceError`) and its details (`grpc-status-details-bin`). */
function statusTrailers(err: unknown): Record<string, string | string[]> {
  const error = toServiceError(err);
  return { "grpc-status": String(error.code), "grpc-message": encodeURI(error.details ?? ""), ...error.metadata?.toHttp2Headers() } as Record<string, string | string[]>;
}
