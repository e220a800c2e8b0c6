import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import { createServer, type Server } from "node:http";
import { STORE_FAILURE_KINDS } from "../storage/store-failure.js";

/**
 * The process's Prometheus metrics (DESIGN.md "Transport"): per-method call
 * counts by status code and latency, backend health and durability mode, store
 * failures by kind, and live follow streams. Served as text on `--metrics-listen` at `/metrics`.
 */
export class Metrics {
  readonly registry = new Registry();
  /** Finished RPCs by service, method and gRPC status code name. */
  readonly rpcs = new Counter({
    name: "mecatl_drivers_rpcs_total",
    help: "Finished RPCs by service, method and status code",
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
  /** Store failures answered to callers, by StoreFailure kind (storage/store-failure.ts; issue 9). */
  readonly storeFailures = new Counter({
    name: "mecatl_drivers_store_failures_total",
    help: "Calls that failed because of the store (infrastructure, not the request), by kind: unreachable, outcome_unknown, not_durable, disk_full, io_error",
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

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: "mecatl_drivers_" });
    // Every kind is exported from the start, so that rate() sees the first failure.
    for (const kind of STORE_FAILURE_KINDS) this.storeFailures.inc({ kind }, 0);
  }

  /**
   * Serves `/metrics` on `host:port`.
   *
   * @returns the HTTP server (already listening) and its bound port.
   */
  async listen(host: string, port: number): Promise<{ server: Server; port: number }> {
    const server = createServer((req, res) => {
      if (req.url !== "/metrics") {
        res.writeHead(404).end("not found; metrics are at /metrics\n");
        return;
      }
      this.registry.metrics().then(
        (text) => res.writeHead(200, { "content-type": this.registry.contentType }).end(text),
        (err: Error) => res.writeHead(500).end(err.message),
      );
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, host, () => resolve());
    });
    const addr = server.address();
    return { server, port: typeof addr === "object" && addr !== null ? addr.port : port };
  }
}
