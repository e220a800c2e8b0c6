import { ConnectError } from "@connectrpc/connect";
import { Health, HealthCheckResponse_ServingStatus as Status } from "../../gen/grpc/health/v1/health_pb.js";
import { grpcClient } from "./clients.js";
import type { ServerProcess } from "./server.js";
import { waitFor } from "./wait.js";
import { expect } from "vitest";

/** One parsed JSON log line of a test server (pino fields plus ours). */
export type LogEntry = Record<string, unknown> & { msg?: string; level?: number };

/** Every JSON log line of `server` so far whose `msg` is `msg` (non-JSON lines are skipped). */
export function logEntries(server: ServerProcess, msg: string): LogEntry[] {
  const out: LogEntry[] = [];
  for (const line of server.stderr) {
    try {
      const entry = JSON.parse(line) as LogEntry;
      if (entry.msg === msg) out.push(entry);
    } catch {
      // a startup error line, not JSON
    }
  }
  return out;
}

/** The overall grpc.health.v1 status of the server at `address`. */
export async function overallHealth(address: string): Promise<Status> {
  return (await grpcClient(Health, address).check({ service: "" })).status;
}

/**
 * Every health status the server at `address` reports for the overall entry,
 * as grpc.health.v1 Watch delivers them, until `stop()` is called.
 */
export function watchHealth(address: string): { seen: Status[]; stop(): Promise<void> } {
  const seen: Status[] = [];
  const abort = new AbortController();
  const running = (async () => {
    try {
      for await (const r of grpcClient(Health, address).watch({ service: "" }, { signal: abort.signal })) seen.push(r.status);
    } catch {
      // cancelled by stop(), or the server went away
    }
  })();
  return {
    seen,
    async stop() {
      abort.abort();
      await running;
    },
  };
}

/** The value of one Prometheus sample (`name{labels}`) scraped from `metricsAddress`, or undefined when absent. */
export async function metricSample(metricsAddress: string, sample: string): Promise<number | undefined> {
  const text = await (await fetch(`http://${metricsAddress}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${sample} `));
  return line === undefined ? undefined : Number(line.slice(sample.length + 1));
}

/** How a call ended and after how many milliseconds. */
export interface TimedOutcome {
  ms: number;
  /** Undefined when the call succeeded. */
  error?: ConnectError;
}

/** Awaits `call`, measuring its wall time; a ConnectError is returned, anything else rethrown. */
export async function timed(call: Promise<unknown>): Promise<TimedOutcome> {
  const started = performance.now();
  try {
    await call;
    return { ms: performance.now() - started };
  } catch (err) {
    if (!(err instanceof ConnectError)) throw err;
    return { ms: performance.now() - started, error: err };
  }
}

export { Status as ServingStatus };

/**
 * The health of a server through one store problem: {@link notServing} waits
 * until Check answers NOT_SERVING and Watch has delivered it, then checks
 * that the change was logged once with exactly `problem`;
 * {@link servingAgain} waits (up to `withinMs`) until Check answers SERVING
 * and Watch has delivered it, and checks the one "takes writes again" line
 * for it. Watch runs from this call until {@link stop}; each wait looks at
 * what it delivered since the previous one.
 */
export function healthThrough(server: ServerProcess): {
  notServing(problem: string, withinMs: number): Promise<void>;
  servingAgain(problem: string, withinMs: number): Promise<void>;
  stop(): Promise<void>;
} {
  const watched = watchHealth(server.address);
  /** Statuses Watch delivered before this index were matched already. */
  let from = 0;
  const reached = async (status: Status, withinMs: number, what: string) => {
    await waitFor(async () => (await overallHealth(server.address)) === status, withinMs, `health ${what} (Check)`);
    await waitFor(() => watched.seen.slice(from).includes(status), withinMs, `health ${what} (Watch)`);
    from = watched.seen.length;
  };
  return {
    async notServing(problem, withinMs) {
      await reached(Status.NOT_SERVING, withinMs, "NOT_SERVING");
      expect(logEntries(server, "store cannot take writes; health is NOT_SERVING").filter((e) => e.problem === problem)).toHaveLength(1);
    },
    async servingAgain(problem, withinMs) {
      await reached(Status.SERVING, withinMs, "SERVING");
      expect(logEntries(server, "store takes writes again; health is SERVING").filter((e) => e.was === problem)).toHaveLength(1);
    },
    stop: () => watched.stop(),
  };
}
