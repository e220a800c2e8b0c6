import { context, trace, SpanKind, SpanStatusCode, type Span } from "@opentelemetry/api";
import { ATTR, tracer, tracingEnabled } from "./tracer.js";

/**
 * Wraps a store object so that every method call made inside a traced RPC
 * becomes a child span `<storeName>.<method>` of the active span (issue 14,
 * deliverable 5), with the backend kind (`mecatl.backend`,
 * `db.system.name`) and the method (`db.operation.name`). The span ends when
 * the method's promise settles (at once for a method that returns a plain
 * value); a rejection sets status ERROR with `error.type` (the
 * StoreFailure kind, or the error's class name). Arguments and results are
 * never recorded: they hold raw ids and payloads.
 *
 * Calls made outside a recording span (background work such as the
 * event-log change feed, a call the sampler left out, or work that outlived
 * its call) run untraced. Properties that are not functions (say an event-log
 * store's `feed`) pass through unchanged, and methods run with the original
 * object as `this`.
 *
 * @param store the backend's store implementation, as the service's open.ts built it.
 * @param storeName the store interface's name, e.g. `SessionStore`.
 * @param backend the backend kind, e.g. `sqlite` or `redis`.
 * @returns `store` itself while tracing is off (no cost per call), else a proxy.
 */
export function traceStore<T extends object>(store: T, storeName: string, backend: string): T {
  if (!tracingEnabled()) return store;
  const wrapped = new Map<PropertyKey, unknown>();
  return new Proxy(store, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop, target);
      if (typeof value !== "function" || typeof prop === "symbol") return value;
      let fn = wrapped.get(prop);
      if (fn === undefined) wrapped.set(prop, (fn = tracedMethod(target, value as (...args: unknown[]) => unknown, `${storeName}.${prop}`, prop, backend)));
      return fn;
    },
  });
}

function tracedMethod(target: object, method: (...args: unknown[]) => unknown, name: string, operation: string, backend: string) {
  const attributes = { [ATTR.backend]: backend, [ATTR.dbSystem]: backend, [ATTR.dbOperation]: operation };
  return (...args: unknown[]): unknown => {
    const parent = context.active();
    if (trace.getSpan(parent)?.isRecording() !== true) return method.apply(target, args);
    const span = tracer().startSpan(name, { kind: SpanKind.INTERNAL, attributes }, parent);
    let result: unknown;
    try {
      result = context.with(trace.setSpan(parent, span), () => method.apply(target, args));
    } catch (err) {
      endWithError(span, err);
      throw err;
    }
    if (!(result instanceof Promise)) {
      span.end();
      return result;
    }
    return result.then(
      (value) => {
        span.end();
        return value;
      },
      (err: unknown) => {
        endWithError(span, err);
        throw err;
      },
    );
  };
}

/** Ends `span` with status ERROR and an `error.type` that says what kind of failure it was, never its message (messages may name ids). */
function endWithError(span: Span, err: unknown): void {
  const kind = (err as { kind?: unknown } | undefined)?.kind;
  span.setAttribute(ATTR.errorType, typeof kind === "string" ? kind : err instanceof Error ? err.constructor.name : "unknown");
  span.setStatus({ code: SpanStatusCode.ERROR });
  span.end();
}
