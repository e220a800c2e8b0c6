import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import { createServer, type Server } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { TlsMaterial } from "./tls.js";
import { STORE_FAILURE_KINDS } from "../storage/store-failure.js";

/**
 * The process's Prometheus metrics (docs/DESIGN.md "Transport"): per-method call
 * counts by status code and latency, backend health and durability mode, store
 * failures by kind, live follow streams, SQLite group-commit sizes and the
 * store's size per kind (issue 14), plus the standard process and Node.js
 * metrics under their standard names (`process_cpu_seconds_total`,
 * `nodejs_heap_size_used_bytes`, ...: no prefix, so stock dashboards work).
 * Served as text on `--metrics-listen` at `/metrics`, over HTTPS with
 * `--metrics-tls-cert`.
 */
export class Metrics {
  readonly registry = new Registry();
  /** Finished RPCs by service, method and gRPC status code name. */
  readonly rpcs = new Counter({
    name: "mecatl_drivers_rpcs_total",
    help: "Finished RPCs that reached their method, by service, method and status code (calls refused by authentication or request decoding are not counted)",
    labelNames: ["service", "method", "code"] as const,
    registers: [this.registry],
  });
  /**
   * Calls whose handler is running, by service and method: up once the
   * request is admitted and decoded, down when the answer or the stream's
   * end is produced. Tests wait on it to know a call has reached the server.
   */
  readonly rpcsInFlight = new Gauge({
    name: "mecatl_drivers_rpcs_in_flight",
    help: "RPCs whose handler is running, by service and method",
    labelNames: ["service", "method"] as const,
    registers: [this.registry],
  });
  /** Bytes taken from the `--max-inflight-bytes` budget (requests being received or handled, answers being sent). */
  readonly inflightBytes = new Gauge({
    name: "mecatl_drivers_inflight_bytes",
    help: "Request and answer bytes held against --max-inflight-bytes",
    registers: [this.registry],
  });
  /** RPC latency in seconds, from request decoded to response or stream end. */
  readonly rpcSeconds = new Histogram({
    name: "mecatl_drivers_rpc_duration_seconds",
    help: "RPC latency in seconds (streams: until the stream ends)",
    labelNames: ["service", "method"] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 60],
    registers: [this.registry],
  });
  /** 1 while the store can take writes, 0 while it makes health NOT_SERVING (storage/backend.ts `backendProblem`). */
  readonly backendUp = new Gauge({
    name: "mecatl_drivers_backend_up",
    help: "1 while the storage backend can take writes (reachable, durable, disk not full)",
    labelNames: ["backend"] as const,
    registers: [this.registry],
  });
  /** Redis durability checks by outcome (storage/redis-durability-watch.ts `DurabilityCheckOutcome`). */
  readonly durabilityChecks = new Counter({
    name: "mecatl_drivers_redis_durability_checks_total",
    help: "Redis durability checks (appendonly/appendfsync, replicas) by outcome: passed, problem, failed (no answer in time, or an error), not_connected (due while the connection was down)",
    labelNames: ["outcome"] as const,
    registers: [this.registry],
  });
  /** Store failures answered to callers, by StoreFailure kind (storage/store-failure.ts; issue 9). */
  readonly storeFailures = new Counter({
    name: "mecatl_drivers_store_failures_total",
    help: "Calls that failed because of the store (infrastructure, not the request), by kind: unreachable, outcome_unknown, not_durable, disk_full (disk or memory limit full), io_error",
    labelNames: ["kind"] as const,
    registers: [this.registry],
  });
  /** 1 for the durability mode in force (`full` or `relaxed` / `none`). */
  readonly durability = new Gauge({
    name: "mecatl_drivers_durability",
    help: "1 for the durability mode in force: full (fsync before OK), relaxed, or none (memory)",
    labelNames: ["mode"] as const,
    registers: [this.registry],
  });
  /** Open ReadAfter follow streams in this process. */
  readonly followers = new Gauge({
    name: "mecatl_drivers_followers",
    help: "Open ReadAfter follow streams",
    registers: [this.registry],
  });
  /** Open follow streams that reached the tail of their log and wait for the next append (a subset of {@link followers}). */
  readonly followersParked = new Gauge({
    name: "mecatl_drivers_followers_parked",
    help: "Follow streams at the tail of their log, waiting for the next append",
    registers: [this.registry],
  });
  /** Times a follow stream reached the tail of its log and began to wait (monotone; tests wait on it). */
  readonly followerParks = new Counter({
    name: "mecatl_drivers_follower_parks_total",
    help: "Times a follow stream reached the tail of its log and began waiting for an append",
    registers: [this.registry],
  });

  /**
   * Writes per SQLite group commit: one transaction and one fsync carry this
   * many write operations (issue 14). Near 1 under light load; it grows with
   * concurrency, which is how SQLite keeps up with many writers.
   */
  readonly groupCommitWrites = new Histogram({
    name: "mecatl_drivers_group_commit_writes",
    help: "Write operations per SQLite group commit (one transaction, one fsync)",
    buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024],
    registers: [this.registry],
  });
  /** Records per kind in the store (sessions, events, leases, schedules, fires), as last measured. */
  readonly storeRecords = new Gauge({
    name: "mecatl_drivers_store_records",
    help: "Records per kind in the store (snapshots, event-log records, lease records, schedules, fire records), as last measured",
    labelNames: ["kind"] as const,
    registers: [this.registry],
  });
  /** Bytes per kind (SQLite: database pages; Redis: MEMORY USAGE), plus `other` and SQLite's `free` pages, as last measured. */
  readonly storeBytes = new Gauge({
    name: "mecatl_drivers_store_bytes",
    help: "Bytes per kind in the store (SQLite: pages of its tables and indexes; Redis: MEMORY USAGE of its keys), plus other and free (SQLite freelist), as last measured",
    labelNames: ["kind"] as const,
    registers: [this.registry],
  });
  /** Unix time in seconds of the last successful store measurement. */
  readonly storeMeasuredAt = new Gauge({
    name: "mecatl_drivers_store_measured_timestamp_seconds",
    help: "Unix time of the last successful measurement of the store size (--store-size-interval)",
    registers: [this.registry],
  });
  /** Seconds the last store measurement took. */
  readonly storeMeasureSeconds = new Gauge({
    name: "mecatl_drivers_store_measure_duration_seconds",
    help: "Seconds the last measurement of the store size took",
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry });
    // Every kind is exported from the start, so that rate() sees the first failure.
    for (const kind of STORE_FAILURE_KINDS) this.storeFailures.inc({ kind }, 0);
  }

  /**
   * Serves `/metrics` (GET or HEAD, query parameters ignored; other methods
   * 405, other paths 404) on `host:port`: plain HTTP, or HTTPS (TLS 1.2+) with
   * `tls`, requiring a client certificate signed by `tls.clientCa` when given.
   *
   * @returns the server (already listening) and its bound port.
   * @throws Error when the port cannot be bound or the certificate and key do not match.
   */
  async listen(host: string, port: number, tls?: TlsMaterial): Promise<{ server: Server; port: number }> {
    const handler = (req: import("node:http").IncomingMessage, res: import("node:http").ServerResponse) => {
      // A scrape may carry query parameters (Prometheus `params:`); they change nothing here.
      if (req.url?.split("?", 1)[0] !== "/metrics") {
        res.writeHead(404).end("not found; metrics are at /metrics\n");
        return;
      }
      if (req.method !== "GET" && req.method !== "HEAD") {
        res.writeHead(405, { allow: "GET, HEAD" }).end("metrics are read with GET\n");
        return;
      }
      this.registry.metrics().then(
        (text) => res.writeHead(200, { "content-type": this.registry.contentType }).end(text),
        (err: Error) => res.writeHead(500).end(err.message),
      );
    };
    const server: Server =
      tls === undefined
        ? createServer(handler)
        : createHttpsServer({ cert: tls.cert, key: tls.key, ca: tls.clientCa, requestCert: tls.clientCa !== undefined, rejectUnauthorized: tls.clientCa !== undefined, minVersion: "TLSv1.2" }, handler);
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, host, () => resolve());
    });
    const addr = server.address();
    return { server, port: typeof addr === "object" && addr !== null ? addr.port : port };
  }
}
