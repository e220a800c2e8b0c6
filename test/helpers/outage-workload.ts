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
  let acked = 0;
  const log = clients.eventLog!;
  const append = log.append.bind(log);
  log.append = async (...args) => {
    const cursor = await append(...args);
    acked++;
    return cursor;
  };
  let claimed = 0;
  const schedules = clients.scheduleStore!;
  const claim = schedules.claimSchedule.bind(schedules);
  schedules.claimSchedule = async (...args) => {
    const schedule = await claim(...args);
    claimed++;
    return schedule;
  };
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
    acked: () => acked,
    claimed: () => claimed,
    finish: () => {
      done.abort();
      return run;
    },
    close: () => clients.close(),
  };
}
