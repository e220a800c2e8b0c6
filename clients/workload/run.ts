import type { SessionStoreClient } from "../session-store-client.js";
import type { EventLogClient } from "../event-log-client.js";
import type { SessionLeaseClient } from "../session-lease-client.js";
import type { ScheduleStoreClient } from "../schedule-store-client.js";
import { setTimeout as sleep } from "node:timers/promises";
import { nowNanos } from "../time.js";
import { Random } from "./content.js";
import type { WorkloadContext, WorkloadOptions } from "./context.js";
import { HarnessProcess, type SlotState } from "./harness.js";
import { LeaseLedger } from "./lease-ledger.js";
import { Slot, Violations, type SessionModel } from "./model.js";
import { ClaimLedger, SchedulerCandidate, workloadSchedule, workloadScheduleName } from "./scheduler.js";
import { ScheduleNotFoundError } from "../errors.js";
import { WorkloadStats } from "./stats.js";
import { cleanUp, verifyRun } from "./verify.js";
import { Watcher } from "./watcher.js";

/** The clients a run uses; only the session store is required (the other parts are skipped without theirs). */
export interface WorkloadClients {
  sessionStore: SessionStoreClient;
  eventLog?: EventLogClient;
  sessionLease?: SessionLeaseClient;
  scheduleStore?: ScheduleStoreClient;
}

/** Everything a run measured and checked. */
export interface WorkloadResult {
  stats: WorkloadStats;
  violations: Violations;
  /** Seconds the harness processes took turns (the measured phase). */
  writeSeconds: number;
  sessions: number;
  turns: number;
  leaseGrants: number;
  claims: number;
  lostClaims: number;
  crashes: number;
  watcherReconnects: number;
  watcherResumes: number;
  /** Calls sent again, or writes looked up, because of an outage (`outages` option). */
  outageRetries: number;
  /** Parts skipped for want of a client, e.g. `scheduler (no --schedule-store-url)`. */
  skipped: string[];
  /** Which parts ran: events and watchers, leases, the scheduler. */
  ran: { events: boolean; leases: boolean; scheduler: boolean };
  /** True when the run was interrupted (Ctrl-C) before its duration was over. */
  interrupted: boolean;
}

/** Progress as reported about once a second. */
export interface WorkloadProgress {
  seconds: number;
  calls: number;
  bytes: number;
  errors: number;
  sessions: number;
  claims: number;
  violations: number;
}

/**
 * Runs the harness workload: `processes` emulated harness processes with
 * `sessions` slots each write sessions for `durationMs`, `watchers` follow
 * them, one scheduler at a time fires the run's schedules, and processes
 * crash and restart if asked. Then the watchers drain, the store is checked
 * against everything acknowledged, and (unless `keepData`) the run's
 * sessions and schedules are deleted.
 *
 * `interrupt` (Ctrl-C, or a fault test that stops after a number of kill
 * cycles) ends the turns early; the drain, the checks and the
 * clean-up still run, so the summary covers what was done. Whatever happens
 * after the schedules were created, none of them is left enabled: they are
 * deleted, or with `keepData` disabled (issue 14), so no harness sharing the
 * store keeps firing them.
 */
export async function runWorkload(clients: WorkloadClients, options: WorkloadOptions, onProgress?: (p: WorkloadProgress) => void, interrupt?: AbortSignal): Promise<WorkloadResult> {
  try {
    return await runParts(clients, options, onProgress, interrupt);
  } catch (err) {
    // A run that failed part-way still leaves none of its schedules enabled.
    if (clients.scheduleStore !== undefined) await disableSchedules(clients.scheduleStore, options).catch(() => undefined);
    throw err;
  }
}

async function runParts(clients: WorkloadClients, options: WorkloadOptions, onProgress: ((p: WorkloadProgress) => void) | undefined, interrupt: AbortSignal | undefined): Promise<WorkloadResult> {
  const stop = new AbortController();
  const ctx: WorkloadContext = { options, ...clients, stats: new WorkloadStats(), violations: new Violations(), leases: new LeaseLedger(), stop: stop.signal };
  const skipped: string[] = [];
  if (clients.eventLog === undefined) skipped.push("events and watchers (no --event-log-url)");
  if (clients.sessionLease === undefined) skipped.push("leases and scheduler (no --session-lease-url)");
  else if (clients.scheduleStore === undefined) skipped.push("scheduler (no --schedule-store-url)");

  const ledger = new ClaimLedger();
  const scheduleNames: string[] = [];
  const scheduling = clients.scheduleStore !== undefined && clients.sessionLease !== undefined && options.schedules > 0;
  if (scheduling) {
    for (let i = 0; i < options.schedules; i++) {
      const s = workloadSchedule(options.runId, i, nowNanos());
      await ctx.stats.time("ScheduleStoreService/SaveSchedule", 0, () => clients.scheduleStore!.saveSchedule(s));
      scheduleNames.push(s.Spec.Name);
    }
  }

  const slots: SlotState[][] = Array.from({ length: options.processes }, (_, p) =>
    Array.from({ length: options.sessions }, (_, s) => ({ slot: new Slot(`p${p}s${s}`), rng: new Random(options.seed * 7919 + p * 131 + s), opened: 0 })),
  );
  const candidate = scheduling ? (keeper: ConstructorParameters<typeof SchedulerCandidate>[1], crashed: () => boolean) => new SchedulerCandidate(ctx, keeper, crashed, ledger) : undefined;
  const processes = slots.map((s, i) => new HarnessProcess(ctx, i, 0, s, candidate));
  for (const p of processes) p.start();

  const writersDone = new AbortController();
  let drainDeadline = Infinity;
  const allSlots = slots.flat().map((s) => s.slot);
  const watchers =
    clients.eventLog === undefined ? [] : Array.from({ length: options.watchers }, (_, i) => new Watcher(ctx, clients.eventLog!, `w${i}`, allSlots[i % allSlots.length]!, new Random(options.seed + 104_729 * (i + 1)), writersDone.signal, () => drainDeadline));
  const watching = watchers.map((w) => w.run());

  const sessions = () => allSlots.flatMap((s) => s.sessions);
  const progress = setInterval(() => {
    const t = ctx.stats.totals();
    onProgress?.({ seconds: ctx.stats.elapsedSeconds(), ...t, sessions: sessions().length, claims: ledger.total, violations: ctx.violations.total });
  }, 1000);

  let crashes = 0;
  const crashing = (async () => {
    const rng = new Random(options.seed ^ 0x5eed);
    while (options.crashEveryMs > 0 && !stop.signal.aborted) {
      await new Promise((r) => setTimeout(r, options.crashEveryMs * (0.5 + rng.next())));
      if (stop.signal.aborted) break;
      const i = rng.int(0, processes.length - 1);
      const old = processes[i]!;
      await old.crash();
      crashes++;
      processes[i] = new HarnessProcess(ctx, i, old.generation + 1, slots[i]!, candidate);
      if (!stop.signal.aborted) processes[i]!.start();
    }
  })();

  await sleep(options.durationMs, undefined, { signal: interrupt }).catch(() => undefined);
  stop.abort();
  const writeSeconds = ctx.stats.elapsedSeconds();
  await crashing;
  await Promise.all(processes.map((p) => p.done));
  for (const s of allSlots) s.current?.finish();
  writersDone.abort();
  drainDeadline = Date.now() + options.drainMs;
  await Promise.all(watching);
  clearInterval(progress);

  const all: SessionModel[] = sessions();
  await verifyRun(ctx, all, scheduleNames, ledger);
  // Disabled first, so that a schedule whose deletion fails does not keep firing.
  if (clients.scheduleStore !== undefined) await disableSchedules(clients.scheduleStore, options);
  if (!options.keepData) await cleanUp(ctx, all, scheduleNames);
  return {
    stats: ctx.stats,
    violations: ctx.violations,
    writeSeconds,
    sessions: all.length,
    turns: all.reduce((n, s) => n + (s.snapshot?.turn ?? 0), 0),
    leaseGrants: ctx.leases.grants,
    claims: ledger.total,
    lostClaims: ledger.lostClaims,
    crashes,
    watcherReconnects: watchers.reduce((n, w) => n + w.reconnects, 0),
    watcherResumes: watchers.reduce((n, w) => n + w.resumes, 0),
    outageRetries: ctx.stats.outageRetries,
    skipped,
    ran: { events: clients.eventLog !== undefined, leases: clients.sessionLease !== undefined, scheduler: scheduling },
    interrupted: interrupt?.aborted ?? false,
  };
}

/**
 * Disables every schedule a run with these options may have created
 * (`<runId>-sched-<i>`); names that do not exist (any more) are skipped.
 * Used after every run (before its clean-up), after a run that failed, and
 * when the operator stops a run at once, so that none of its schedules keeps
 * firing.
 *
 * @param timeoutMs bound on each call (default: none).
 * @throws what SetScheduleEnabled throws besides not-found.
 */
export async function disableSchedules(store: ScheduleStoreClient, options: Pick<WorkloadOptions, "runId" | "schedules">, timeoutMs?: number): Promise<void> {
  const names = Array.from({ length: options.schedules }, (_, i) => workloadScheduleName(options.runId, i));
  const disable = (name: string) =>
    store.setScheduleEnabled(name, false, { timeoutMs }).catch((err: unknown) => {
      if (!(err instanceof ScheduleNotFoundError)) throw err;
    });
  await Promise.all(names.map(disable));
}
