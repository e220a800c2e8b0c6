import { openDriverClients, type DriverClients } from "../../clients/factory.js";
import { runWorkload, type WorkloadResult } from "../../clients/workload/run.js";
import { DEFAULT_WORKLOAD, type WorkloadOptions } from "../../clients/workload/context.js";

/** The harness workload running against one server address while a fault test breaks things. */
export interface OutageWorkload {
  /** The clients the workload uses (closed by {@link OutageWorkload.close}). */
  readonly clients: DriverClients;
  /** Event appends acknowledged so far: progress a fault test waits for between faults. */
  acked(): number;
  /** Schedule claims (ClaimSchedule answered OK) so far. */
  claimed(): number;
  /** Ends the turns; the drain, the checks and the clean-up then run. Resolves with the run's result. */
  finish(): Promise<WorkloadResult>;
  /** Closes the clients. */
  close(): void;
}

/**
 * Starts the harness workload (clients/workload) against every service at
 * `address`, expecting outages (a call that fails UNAVAILABLE is retried, a
 * write whose outcome is unknown is looked up before it is sent again), with
 * `options` over the defaults, counting acknowledged appends and claims.
 */
export async function startOutageWorkload(address: string, options: Partial<WorkloadOptions> & { runId: string }): Promise<OutageWorkload> {
  const clients = await openDriverClients({ sessionStoreUrl: address, eventLogUrl: address, sessionLeaseUrl: address, scheduleStoreUrl: address });
  const log = clients.eventLog!;
  const acked = countResolved(log, "append");
  const claimed = countResolved(clients.scheduleStore!, "claimSchedule");
  const done = new AbortController();
  const run = runWorkload(
    { sessionStore: clients.sessionStore!, eventLog: log, sessionLease: clients.sessionLease, scheduleStore: clients.scheduleStore },
    { ...DEFAULT_WORKLOAD, durationMs: 300_000, mediaEvery: 0, tickMs: 200, reconnectMs: 0, outages: true, ...options },
    undefined,
    done.signal,
  );
  run.catch(() => undefined);
  return {
    clients,
    acked,
    claimed,
    finish: () => {
      done.abort();
      return run;
    },
    close: () => clients.close(),
  };
}

/** Replaces `target[method]` (an async method) by one that counts the calls it resolves; returns the count so far. */
function countResolved<T extends object, K extends keyof T & string>(target: T, method: K): () => number {
  let resolved = 0;
  const original = (target[method] as (...args: unknown[]) => Promise<unknown>).bind(target);
  (target as Record<string, unknown>)[method] = async (...args: unknown[]) => {
    const answer = await original(...args);
    resolved++;
    return answer;
  };
  return () => resolved;
}
