import type { DescService } from "@bufbuild/protobuf";
import { Code, type HandlerContext } from "@connectrpc/connect";
import { toConnectError } from "../rpc/errors.js";
import type { AnyServiceImpl } from "./grpc-adapter.js";
import type { Metrics } from "./metrics.js";
import type { Logger } from "./logger.js";
import { recordStoreFailure } from "./store-failure-log.js";
import { traceMethod } from "../tracing/rpc-spans.js";

/** What {@link instrument} adds around every method. */
export interface InstrumentOptions {
  metrics: Metrics;
  logger: Logger;
  /**
   * Set when tracing is on (services/server/tracing-sdk.ts): every call is
   * also one server span carrying this backend kind (services/tracing/rpc-spans.ts).
   * Left out, calls are not traced and pay nothing for it.
   */
  trace?: { backend: string };
}

/**
 * Wraps a service implementation with the cross-cutting rules every
 * `mecatl.driver.v1` method shares, once for both transports: conversion of
 * unexpected errors to INTERNAL without leaking details (wire-contract.md
 * section 1), per-method metrics (calls in flight, finished calls by code,
 * latency), and a log line for every INTERNAL error (with its cause; never
 * payloads), and, when tracing is on, one OpenTelemetry server span (issue
 * 14). Bearer tokens are checked earlier, before the request body is read
 * (admission.ts).
 *
 * Metric children are resolved once per method (and per code on first use),
 * so a call allocates no label objects (issue 11).
 */
export function instrument(service: DescService, impl: AnyServiceImpl, options: InstrumentOptions): AnyServiceImpl {
  const out: AnyServiceImpl = {};
  for (const method of service.methods) {
    const fn = impl[method.localName];
    if (fn === undefined) continue;
    const inFlight = options.metrics.rpcsInFlight.labels(service.typeName, method.name);
    const seconds = options.metrics.rpcSeconds.labels(service.typeName, method.name);
    const rpc = `${service.name}/${method.name}`;
    const byCode = new Map<string, { inc(): void }>();
    const count = (code: string) => {
      let child = byCode.get(code);
      if (child === undefined) byCode.set(code, (child = options.metrics.rpcs.labels(service.typeName, method.name, code)));
      child.inc();
    };
    const start = () => {
      inFlight.inc();
      return process.hrtime.bigint();
    };
    const finish = (started: bigint, err: unknown) => {
      inFlight.dec();
      const ce = err === undefined ? undefined : toConnectError(err);
      recordStoreFailure(options, rpc, err);
      count(ce === undefined ? "OK" : Code[ce.code]);
      seconds.observe(Number(process.hrtime.bigint() - started) / 1e9);
      if (ce?.code === Code.Internal) {
        options.logger.error({ rpc, err: ce.cause instanceof Error ? ce.cause.message : String(ce.cause) }, "internal error");
      }
      return ce;
    };
    let wrapped: AnyServiceImpl[string];
    if (method.methodKind === "server_streaming") {
      wrapped = async function* (req: unknown, ctx: HandlerContext) {
        const started = start();
        let ended = false;
        try {
          yield* fn(req, ctx) as AsyncIterable<unknown>;
        } catch (err) {
          ended = true;
          throw finish(started, err);
        } finally {
          // Completed, or closed early by the transport (client gone, shutdown).
          if (!ended) finish(started, ctx.signal.aborted ? ctx.signal.reason : undefined);
        }
      };
    } else {
      wrapped = async (req: unknown, ctx: HandlerContext) => {
        const started = start();
        try {
          const res = await fn(req, ctx);
          finish(started, undefined);
          return res;
        } catch (err) {
          throw finish(started, err);
        }
      };
    }
    out[method.localName] = options.trace === undefined ? wrapped : traceMethod(service, method, wrapped, options.trace.backend);
  }
  return out;
}
