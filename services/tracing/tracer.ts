/**
 * The process's OpenTelemetry tracer and the names of the attributes this
 * project puts on its spans (issue 14, deliverable 5). A leaf module: it
 * imports only `@opentelemetry/api`, so that the storage layer, the services
 * and the server can all use it. Tracing is off until the server starts an
 * exporter (services/server/tracing-sdk.ts, driven by the standard `OTEL_*`
 * environment variables); while it is off, every wrapper in services/tracing
 * hands back the object it was given and nothing is done per call.
 */
import { createHash } from "node:crypto";
import { trace, type Tracer } from "@opentelemetry/api";

/** Instrumentation scope name of every span this process makes. */
export const TRACER_NAME = "mecatl-drivers";

/** Attribute names; the `rpc.*`, `db.*` and `error.type` ones follow the OpenTelemetry semantic conventions. */
export const ATTR = {
  rpcSystem: "rpc.system",
  rpcService: "rpc.service",
  rpcMethod: "rpc.method",
  /** Numeric gRPC status code of the call (Connect codes are the same numbers). */
  rpcStatusCode: "rpc.grpc.status_code",
  dbSystem: "db.system.name",
  dbOperation: "db.operation.name",
  errorType: "error.type",
  /** Backend kind of the process's store: `sqlite` or `redis`. */
  backend: "mecatl.backend",
  /** {@link hashId} of the request's session id. */
  sessionIdHash: "mecatl.session.id_hash",
  /** {@link hashId} of the request's schedule name. */
  scheduleIdHash: "mecatl.schedule.id_hash",
  /** Writes committed together in one SQLite transaction (group commit). */
  groupCommitSize: "mecatl.group_commit.size",
} as const;

let enabled = false;

/** True once the server started tracing (an exporter is configured). */
export function tracingEnabled(): boolean {
  return enabled;
}

/**
 * Marks tracing as on. Called once at start by the server, after it
 * registered a tracer provider and before it opens any store or mounts any
 * service, so that wrappers made afterwards trace.
 */
export function enableTracing(): void {
  enabled = true;
}

/** The tracer every span of this project is made with (the global provider's; a no-op one until tracing starts). */
export function tracer(): Tracer {
  return trace.getTracer(TRACER_NAME);
}

/**
 * The form in which a session id or schedule name appears in traces: the
 * first 16 hex characters (64 bits) of the SHA-256 digest of its UTF-8 bytes.
 * Raw ids are never put on a span (they can carry user data); an operator
 * looking for one id's spans computes the same value
 * (`printf %s "$ID" | sha256sum | cut -c1-16`). Issue 14, deliverable 5.
 */
export function hashId(id: string): string {
  return createHash("sha256").update(id, "utf8").digest("hex").slice(0, 16);
}
