import type { DescService } from "@bufbuild/protobuf";
import { Code, type HandlerContext } from "@connectrpc/connect";
import { toConnectError } from "../rpc/errors.js";
import type { AnyServiceImpl } from "./grpc-adapter.js";
import type { TokenFile } from "./auth.js";
import type { Metrics } from "./metrics.js";
import type { Logger } from "./logger.js";
import { recordStoreFailure } from "./store-failure-log.js";

/** What {@link instrument} adds around every method. */
export interface InstrumentOptions {
  /** When set, every call must carry one of its bearer tokens (UNAUTHENTICATED otherwise). */
  auth?: TokenFile;
  metrics: Metrics;
  logger: Logger;
}

/**
 * Wraps a service implementation with the cross-cutting rules every
 * `mecatl.driver.v1` method shares, once for both transports: bearer-token
 * check (wire-contract.md section 6), conversion of unexpected errors to
 * INTERNAL without leaking details (section 1), per-method metrics, and a log
 * line for every INTERNAL error (with its cause; never payloads).
 */
export function instrument(service: DescService, impl: AnyServiceImpl, options: InstrumentOptions): AnyServiceImpl {
  const out: AnyServiceImpl = {};
  for (const method of service.methods) {
    const fn = impl[method.localName];
    if (fn === undefined) continue;
    const labels = { service: service.typeName, method: method.name };
    const finish = (started: bigint, err: unknown) => {
      const ce = err === undefined ? undefined : toConnectError(err);
      recordStoreFailure(options, `${service.name}/${method.name}`, err);
      options.metrics.rpcs.inc({ ...labels, code: ce === undefined ? "OK" : Code[ce.code] });
      options.metrics.rpcSeconds.observe(labels, Number(process.hrtime.bigint() - started) / 1e9);
      if (ce?.code === Code.Internal) {
        options.logger.error({ rpc: `${service.name}/${method.name}`, err: ce.cause instanceof Error ? ce.cause.message : String(ce.cause) }, "internal error");
      }
      return ce;
    };
    if (method.methodKind === "server_streaming") {
      out[method.localName] = async function* (req: unknown, ctx: HandlerContext) {
        const started = process.hrtime.bigint();
        try {
          options.auth?.check(ctx.requestHeader);
          yield* fn(req, ctx) as AsyncIterable<unknown>;
        } catch (err) {
          throw finish(started, err);
        }
        finish(started, undefined);
      };
    } else {
      out[method.localName] = async (req: unknown, ctx: HandlerContext) => {
        const started = process.hrtime.bigint();
        try {
          options.auth?.check(ctx.requestHeader);
          const res = await fn(req, ctx);
          finish(started, undefined);
          return res;
        } catch (err) {
          throw finish(started, err);
        }
      };
    }
  }
  return out;
}
