import { format } from "node:util";
import { diag, DiagLogLevel } from "@opentelemetry/api";
import { enableTracing } from "../tracing/tracer.js";
import type { Logger } from "./logger.js";
import type { TracingSettings } from "./tracing-settings.js";

/** The running tracing pipeline. */
export interface Tracing {
  /** Exports the spans still buffered and stops; gives up after `timeoutMs` milliseconds (logged). */
  shutdown(timeoutMs: number): Promise<void>;
}

/**
 * Starts OpenTelemetry tracing as `settings` (from the `OTEL_*` environment,
 * tracing-settings.ts) asks: a NodeTracerProvider with a batching span
 * processor (the SDK reads `OTEL_BSP_*` and the sampler variables itself) per
 * exporter; OTLP over `http/protobuf`, `http/json` or `grpc` (the exporter
 * reads `OTEL_EXPORTER_OTLP_*` endpoint, headers, timeout, compression and
 * certificates itself), or the console exporter (spans on stdout); the
 * resource from `OTEL_SERVICE_NAME` / `OTEL_RESOURCE_ATTRIBUTES` plus the
 * host name, with `service.name` `mecatl-drivers` unless they name one; the
 * W3C trace-context propagator unless `OTEL_PROPAGATORS` leaves it out; and
 * async-local-storage context propagation. Then turns tracing on
 * (tracing/tracer.ts). The SDK packages are loaded only here, so a server
 * without tracing never loads them. Issue 14, deliverable 5.
 *
 * OpenTelemetry's own problems (an export that failed, a collector that
 * cannot be reached) are logged as `warn` lines with `source: "opentelemetry"`.
 */
export async function startTracing(settings: TracingSettings, logger: Logger): Promise<Tracing> {
  const [{ NodeTracerProvider }, { BatchSpanProcessor, ConsoleSpanExporter }, resources, { W3CTraceContextPropagator }] = await Promise.all([
    import("@opentelemetry/sdk-trace-node"),
    import("@opentelemetry/sdk-trace-base"),
    import("@opentelemetry/resources"),
    import("@opentelemetry/core"),
  ]);
  const warn = (message: string, ...args: unknown[]) => logger.warn({ source: "opentelemetry" }, format(message, ...args));
  diag.setLogger({ error: warn, warn, info: () => undefined, debug: () => undefined, verbose: () => undefined }, DiagLogLevel.WARN);

  const exporters = await Promise.all(settings.exporters.map((name) => (name === "console" ? new ConsoleSpanExporter() : otlpExporter(settings.protocol))));
  let resource = resources.detectResources({ detectors: [resources.envDetector, resources.hostDetector] });
  if (settings.defaultServiceName) resource = resource.merge(resources.resourceFromAttributes({ "service.name": "mecatl-drivers" }));
  const provider = new NodeTracerProvider({ resource, spanProcessors: exporters.map((exporter) => new BatchSpanProcessor(exporter)) });
  provider.register({ propagator: settings.traceContext ? new W3CTraceContextPropagator() : null });
  enableTracing();
  const otlp = settings.exporters.includes("otlp");
  logger.info({ exporters: settings.exporters, protocol: otlp ? settings.protocol : undefined, endpoint: otlp ? settings.endpoint : undefined, sampler: settings.sampler }, "tracing on");
  return {
    async shutdown(timeoutMs) {
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), timeoutMs)));
      const flushed = provider.shutdown().then(
        () => false,
        (err: Error) => (warn("shutting tracing down failed: %s", err.message), false),
      );
      if (await Promise.race([flushed, timedOut])) logger.warn({ timeoutMs }, "spans not exported before the shutdown deadline were dropped");
      clearTimeout(timer);
    },
  };
}

/** The OTLP trace exporter for `protocol`; it takes endpoint, headers and timeouts from the environment. */
async function otlpExporter(protocol: TracingSettings["protocol"]) {
  if (protocol === "http/json") return new (await import("@opentelemetry/exporter-trace-otlp-http")).OTLPTraceExporter();
  if (protocol === "grpc") return new (await import("@opentelemetry/exporter-trace-otlp-grpc")).OTLPTraceExporter();
  return new (await import("@opentelemetry/exporter-trace-otlp-proto")).OTLPTraceExporter();
}
