import { StartupError } from "../storage/redis-connection.js";

/** OTLP transports `OTEL_EXPORTER_OTLP_PROTOCOL` may name. */
export const OTLP_PROTOCOLS = ["http/protobuf", "http/json", "grpc"] as const;
/** One of {@link OTLP_PROTOCOLS}. */
export type OtlpProtocol = (typeof OTLP_PROTOCOLS)[number];

/** Exporters `OTEL_TRACES_EXPORTER` may name (`none`, also accepted, means none of them). */
export const TRACE_EXPORTERS = ["otlp", "console"] as const;
/** One of {@link TRACE_EXPORTERS}. */
export type TraceExporterName = (typeof TRACE_EXPORTERS)[number];

/** Samplers `OTEL_TRACES_SAMPLER` may name (the OpenTelemetry SDK's built-in ones). */
export const TRACE_SAMPLERS = ["always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio"] as const;

/** Propagators `OTEL_PROPAGATORS` may name. */
export const PROPAGATORS = ["tracecontext", "baggage", "none"] as const;

/** Environment variables read by the SDK that must hold a whole number of milliseconds or spans when set. */
const NUMERIC = [
  "OTEL_BSP_SCHEDULE_DELAY",
  "OTEL_BSP_EXPORT_TIMEOUT",
  "OTEL_BSP_MAX_QUEUE_SIZE",
  "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
  "OTEL_EXPORTER_OTLP_TIMEOUT",
  "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
] as const;

/** Tracing as the `OTEL_*` environment asks for it, already checked. */
export interface TracingSettings {
  exporters: TraceExporterName[];
  /** OTLP transport (`OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`, else `OTEL_EXPORTER_OTLP_PROTOCOL`, default `http/protobuf`). */
  protocol: OtlpProtocol;
  /** OTLP endpoint for logs, if one was given (the exporter reads it from the environment itself). */
  endpoint?: string;
  /** Sampler name (default `parentbased_always_on`); the SDK reads it and `OTEL_TRACES_SAMPLER_ARG` itself. */
  sampler: string;
  /** True unless `OTEL_PROPAGATORS` leaves out `tracecontext`: the caller's `traceparent` is honoured. */
  traceContext: boolean;
  /** True when neither `OTEL_SERVICE_NAME` nor a `service.name` in `OTEL_RESOURCE_ATTRIBUTES` names the service (it is then `mecatl-drivers`). */
  defaultServiceName: boolean;
}

function list(value: string | undefined): string[] {
  return (value ?? "")
    .split(",")
    .map((v) => v.trim().toLowerCase())
    .filter((v) => v !== "");
}

function oneOf<T extends string>(name: string, value: string, allowed: readonly T[]): T {
  if (!(allowed as readonly string[]).includes(value)) throw new StartupError(`${name}=${JSON.stringify(value)} is not supported; use one of ${allowed.join(", ")}`);
  return value as T;
}

/**
 * Reads the standard OpenTelemetry environment variables this server honours
 * (issue 14, deliverable 5) and checks every one of them at start (issue 10).
 *
 * Tracing is **off by default**: it is on only when `OTEL_TRACES_EXPORTER`
 * names an exporter (`otlp`, `console`, or both), or when it is unset and an
 * OTLP endpoint is given (`OTEL_EXPORTER_OTLP_ENDPOINT` or
 * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`); `OTEL_TRACES_EXPORTER=none` or
 * `OTEL_SDK_DISABLED=true` keep it off whatever else is set.
 *
 * @returns undefined when tracing stays off.
 * @throws StartupError naming the variable, for an exporter, protocol,
 *   sampler or propagator this build does not have, a sampler ratio outside
 *   0..1, an endpoint that is not an http(s) URL, or a non-numeric batch or
 *   timeout setting.
 */
export function tracingSettings(env: NodeJS.ProcessEnv): TracingSettings | undefined {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === "true") return undefined;
  const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || env.OTEL_EXPORTER_OTLP_ENDPOINT || undefined;
  for (const name of ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"] as const) {
    const value = env[name];
    if (value && !/^https?:\/\/[^/]/i.test(value)) throw new StartupError(`${name}=${JSON.stringify(value)} is not an http:// or https:// URL`);
  }
  const named = list(env.OTEL_TRACES_EXPORTER);
  for (const e of named) oneOf("OTEL_TRACES_EXPORTER", e, [...TRACE_EXPORTERS, "none"]);
  const exporters = (named.length === 0 && endpoint !== undefined ? ["otlp"] : named.filter((e) => e !== "none")) as TraceExporterName[];
  if (exporters.length === 0) return undefined;

  const protocolVar = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ? "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL" : "OTEL_EXPORTER_OTLP_PROTOCOL";
  const protocol = oneOf(protocolVar, env[protocolVar]?.trim() || "http/protobuf", OTLP_PROTOCOLS);
  // Checked as the SDK reads it (exact, lower case), so that nothing it would reject passes here.
  const sampler = oneOf("OTEL_TRACES_SAMPLER", env.OTEL_TRACES_SAMPLER?.trim() || "parentbased_always_on", TRACE_SAMPLERS);
  const ratio = env.OTEL_TRACES_SAMPLER_ARG?.trim();
  if (sampler.endsWith("traceidratio") && ratio) {
    const r = Number(ratio);
    if (!Number.isFinite(r) || r < 0 || r > 1) throw new StartupError(`OTEL_TRACES_SAMPLER_ARG=${JSON.stringify(ratio)} must be a number from 0 to 1 (the share of traces sampled)`);
  }
  const propagators = env.OTEL_PROPAGATORS === undefined ? ["tracecontext", "baggage"] : list(env.OTEL_PROPAGATORS);
  for (const p of propagators) oneOf("OTEL_PROPAGATORS", p, PROPAGATORS);
  for (const name of NUMERIC) {
    const value = env[name]?.trim();
    if (value && !/^\d+$/.test(value)) throw new StartupError(`${name}=${JSON.stringify(value)} must be a whole number`);
  }
  const defaultServiceName = !env.OTEL_SERVICE_NAME && !/(^|,)\s*service\.name\s*=/.test(env.OTEL_RESOURCE_ATTRIBUTES ?? "");
  return { exporters, protocol, endpoint, sampler, traceContext: propagators.includes("tracecontext"), defaultServiceName };
}
