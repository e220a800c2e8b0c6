import type { SessionStoreClient } from "../session-store-client.js";
import type { EventLogClient } from "../event-log-client.js";
import type { SessionLeaseClient } from "../session-lease-client.js";
import type { ScheduleStoreClient } from "../schedule-store-client.js";
import type { LeaseLedger } from "./lease-ledger.js";
import type { Violations } from "./model.js";
import type { WorkloadStats } from "./stats.js";

/** Knobs of a workload run (the `workload` command's flags). Sizes in bytes, times in milliseconds. */
export interface WorkloadOptions {
  /** How long harness processes keep taking turns. */
  durationMs: number;
  /** Emulated harness processes, each with its own owner id. */
  processes: number;
  /** Concurrent sessions per process. */
  sessions: number;
  /** Followers (ReadAfter with follow), spread over the sessions. */
  watchers: number;
  /** Schedules the scheduler fires every second (0: no scheduler). */
  schedules: number;
  /** A session's snapshot grows to about this size, then the process moves on to a new session. */
  maxSnapshotBytes: number;
  /** Every Nth turn carries inline media (0: never). */
  mediaEvery: number;
  /** Pause between two turns of one session. */
  turnPauseMs: number;
  /** Scheduler tick: DueSchedules, then claim and record what is due. */
  tickMs: number;
  /** Watchers drop and resume their stream about this often (0: never). */
  reconnectMs: number;
  /** About this often one process "crashes" (stops without releasing) and restarts as a new owner (0: never). */
  crashEveryMs: number;
  /** How long watchers may take to catch up after the writers stop. */
  drainMs: number;
  /** Seed of the content generator. */
  seed: number;
  /** Keep the sessions and schedules the run made (default: delete them after the checks). */
  keepData: boolean;
  /** Prefix of every session id and schedule name of this run. */
  runId: string;
  /**
   * The driver or its store may be down for a while (fault tests that kill
   * the server or Redis): a call that fails with UNAVAILABLE is retried, and a
   * write whose answer was UNAVAILABLE is first looked up in the store and
   * sent again only if it is absent (clients/workload/outage.ts), so
   * acknowledged writes and "applied twice" can still be checked exactly.
   */
  outages: boolean;
}

/** Defaults that give a few MiB per session, several processes and watchers, in 30 s. */
export const DEFAULT_WORKLOAD: Omit<WorkloadOptions, "runId"> = {
  durationMs: 30_000,
  processes: 4,
  sessions: 4,
  watchers: 8,
  schedules: 4,
  maxSnapshotBytes: 6 * 1024 * 1024,
  mediaEvery: 5,
  turnPauseMs: 0,
  tickMs: 250,
  reconnectMs: 3_000,
  crashEveryMs: 0,
  drainMs: 15_000,
  seed: 1,
  keepData: false,
  outages: false,
};

/** What every part of a run shares. */
export interface WorkloadContext {
  options: WorkloadOptions;
  sessionStore: SessionStoreClient;
  eventLog?: EventLogClient;
  sessionLease?: SessionLeaseClient;
  scheduleStore?: ScheduleStoreClient;
  stats: WorkloadStats;
  violations: Violations;
  leases: LeaseLedger;
  /** Aborts when the run's duration is over (writers finish their turn and stop). */
  stop: AbortSignal;
}
