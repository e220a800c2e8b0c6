import type { DescField, DescMessage, DescMethod, DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, type HandlerContext } from "@connectrpc/connect";
import { context, propagation, trace, ROOT_CONTEXT, SpanKind, SpanStatusCode, type Context, type Span, type TextMapGetter } from "@opentelemetry/api";
import { ATTR, hashId, tracer } from "./tracer.js";

/** A service method as the shared wrapper sees it (instrument.ts): unary returns a promise, server-streaming an async iterable. */
export type Handler = (request: any, context: HandlerContext) => any;

/**
 * Status codes that mark a server span as failed, as the OpenTelemetry
 * semantic conventions for gRPC servers list them; other non-OK codes (NOT_FOUND,
 * FAILED_PRECONDITION...) are answers the caller asked for and leave the
 * status unset. Every span carries its code in `rpc.grpc.status_code`.
 */
const SERVER_ERRORS: ReadonlySet<Code> = new Set([Code.Unknown, Code.DeadlineExceeded, Code.Unimplemented, Code.Internal, Code.Unavailable, Code.DataLoss]);

/** Reads W3C trace context (`traceparent`, `tracestate`) from a call's request headers (gRPC metadata on the gRPC listener). */
const headerGetter: TextMapGetter<Headers> = {
  keys: (headers) => [...headers.keys()],
  get: (headers, key) => headers.get(key) ?? undefined,
};

/** Where a request carries the id a span records (hashed), found once per method from its descriptor. */
interface IdField {
  attribute: string;
  read(request: Record<string, unknown>): unknown;
}

function field(message: DescMessage, name: string): DescField | undefined {
  return message.fields.find((f) => f.name === name);
}

/**
 * The session id or schedule name a method's request carries, if any:
 * `session_id`, `root_session_id` or `lease.session_id` (session), and
 * `schedule_name`, or `name` on the schedule services (schedule).
 */
function idFieldOf(service: DescService, method: DescMethod): IdField | undefined {
  const input = method.input;
  for (const name of ["session_id", "root_session_id"]) {
    const f = field(input, name);
    if (f?.fieldKind === "scalar") return { attribute: ATTR.sessionIdHash, read: (r) => r[f.localName] };
  }
  const lease = field(input, "lease");
  const leaseId = lease?.fieldKind === "message" ? field(lease.message, "session_id") : undefined;
  if (lease !== undefined && leaseId !== undefined) {
    return { attribute: ATTR.sessionIdHash, read: (r) => (r[lease.localName] as Record<string, unknown> | undefined)?.[leaseId.localName] };
  }
  const schedule = field(input, "schedule_name") ?? (service.typeName.includes("Schedule") ? field(input, "name") : undefined);
  if (schedule?.fieldKind === "scalar") return { attribute: ATTR.scheduleIdHash, read: (r) => r[schedule.localName] };
  return undefined;
}

/**
 * Wraps one method of a mounted service so that every call is one SERVER
 * span (issue 14, deliverable 5), on both listeners:
 *
 * - name `<package.Service>/<Method>`; `rpc.system` (`grpc`, or `connect_rpc`
 *   for the Connect protocol), `rpc.service`, `rpc.method`, `mecatl.backend`;
 * - the request's session id or schedule name hashed ({@link hashId}) in
 *   `mecatl.session.id_hash` / `mecatl.schedule.id_hash`, never raw;
 * - the parent taken from the caller's W3C `traceparent` / `tracestate`
 *   metadata (through the registered propagator);
 * - `rpc.grpc.status_code` when the call ends, and status ERROR (with the code's
 *   name only: error messages can name ids) for the server-side failure codes.
 *
 * The handler runs with the span active, so store calls become its children
 * (traced-store.ts). A server stream's span lasts until the stream ends; each
 * step of it runs with the span active; a stream the transport closes early
 * ends with the code of the abort reason (CANCELLED, or UNAVAILABLE at shutdown).
 *
 * @param fn the method, already wrapped for errors and metrics, so that what it throws is the ConnectError the caller gets.
 * @param backend backend kind for `mecatl.backend`.
 */
export function traceMethod(service: DescService, method: DescMethod, fn: Handler, backend: string): Handler {
  const name = `${service.typeName}/${method.name}`;
  const id = idFieldOf(service, method);
  const attributes = { [ATTR.rpcService]: service.typeName, [ATTR.rpcMethod]: method.name, [ATTR.backend]: backend };
  const begin = (request: Record<string, unknown>, ctx: HandlerContext): Context => {
    const parent = propagation.extract(ROOT_CONTEXT, ctx.requestHeader, headerGetter);
    const span = tracer().startSpan(name, { kind: SpanKind.SERVER, attributes }, parent);
    if (span.isRecording()) {
      span.setAttribute(ATTR.rpcSystem, ctx.protocolName === "connect" ? "connect_rpc" : "grpc");
      const value = id?.read(request);
      if (typeof value === "string" && value !== "") span.setAttribute(id!.attribute, hashId(value));
    }
    return trace.setSpan(parent, span);
  };
  if (method.methodKind === "server_streaming") {
    return async function* (request: Record<string, unknown>, ctx: HandlerContext) {
      const active = begin(request, ctx);
      const span = trace.getSpan(active)!;
      const steps = context.with(active, () => (fn(request, ctx) as AsyncIterable<unknown>)[Symbol.asyncIterator]());
      // "exhausted": the method's stream ended by itself; "thrown": it failed; else the transport closed it early.
      let outcome: "open" | "exhausted" | "thrown" = "open";
      try {
        for (;;) {
          const step = await context.with(active, () => steps.next());
          if (step.done === true) break;
          yield step.value;
        }
        outcome = "exhausted";
      } catch (err) {
        outcome = "thrown";
        end(span, err);
        throw err;
      } finally {
        // Closed early by the transport (client gone, shutdown): let the method finish its own bookkeeping.
        if (outcome === "open") await context.with(active, async () => steps.return?.()).catch(() => undefined);
        // As instrument.ts counts it: a stream that ended after its signal aborted ends with the abort's code.
        if (outcome !== "thrown") end(span, ctx.signal.aborted ? ctx.signal.reason : undefined);
      }
    };
  }
  return async (request: Record<string, unknown>, ctx: HandlerContext) => {
    const active = begin(request, ctx);
    const span = trace.getSpan(active)!;
    try {
      const response: unknown = await context.with(active, fn, undefined, request, ctx);
      end(span, undefined);
      return response;
    } catch (err) {
      end(span, err);
      throw err;
    }
  };
}

function end(span: Span, err: unknown): void {
  const code = err === undefined ? 0 : ConnectError.from(err).code;
  span.setAttribute(ATTR.rpcStatusCode, code);
  if (code !== 0 && SERVER_ERRORS.has(code)) span.setStatus({ code: SpanStatusCode.ERROR, message: Code[code] });
  span.end();
}
