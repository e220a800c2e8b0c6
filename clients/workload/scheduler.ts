import { CronExpressionParser } from "cron-parser";
import { ScheduleNotFoundError } from "../errors.js";
import { SCHEDULER_LEASE_ID } from "../session-lease-client.js";
import type { Schedule, ScheduleFire } from "../schedule-records.js";
import { formatNanos, formatOptionalNanos, nowNanos, parseRfc3339, ZERO_TIME } from "../time.js";
import type { WorkloadContext } from "./context.js";
import type { LeaseKeeper } from "./lease-keeper.js";
import type { Violations } from "./model.js";
import { isOutage, throughOutages } from "./outage.js";

/** The next cron instant strictly after `afterNanos`, in nanoseconds (UTC). */
export function cronNext(cron: string, afterNanos: bigint): bigint {
  const next = CronExpressionParser.parse(cron, { currentDate: new Date(Number(afterNanos / 1_000_000n)), tz: "UTC" }).next().toDate();
  return BigInt(next.getTime()) * 1_000_000n;
}

/** The name of a run's `index`-th schedule: `<runId>-sched-<index>`. */
export function workloadScheduleName(runId: string, index: number): string {
  return `${runId}-sched-${index}`;
}

/** A schedule of this run: fires every second (even indexes) or every two seconds (odd ones). */
export function workloadSchedule(runId: string, index: number, now: bigint): Schedule {
  const cron = index % 2 === 0 ? "* * * * * *" : "*/2 * * * * *";
  return {
    Spec: {
      Name: workloadScheduleName(runId, index),
      Prompt: "summarise what changed since the last run",
      Parts: null,
      Trigger: { Cron: cron, OneShot: ZERO_TIME },
      Selector: { ProviderID: "", ModelID: "" },
      Profile: "",
      EnvironmentRef: { Kind: "local", ID: "/work", Revision: "" },
      PlacementScope: "",
      PlacementOwned: false,
      Mode: "default",
      Limits: { MaxTurns: 4 },
      Mutating: false,
      MaxFires: 0,
      Misfire: 0,
      Singleton: false,
      Timezone: "UTC",
      CreatedAt: formatNanos(now),
      OneShotRetry: false,
      OneShotMaxRetries: 0,
      CarryContext: false,
      OriginSessionID: "",
      Owner: null,
      FireTimeout: 300_000_000_000,
    },
    State: {
      NextFireAt: formatNanos(cronNext(cron, now)),
      LastFireAt: ZERO_TIME,
      FireCount: 0,
      Enabled: true,
      DeletionID: "",
      LastFireSessionID: "",
      OneShotRetryCount: 0,
      LastFireStartedAt: ZERO_TIME,
      LastFireProgressAt: ZERO_TIME,
      FireDeadline: ZERO_TIME,
    },
  };
}

/** Every claim and fire of a run, to check that no slot fired twice and that the store counted each fire. */
export class ClaimLedger {
  /** Who claimed each `name@slot`, in order. */
  private readonly slots = new Map<string, string[]>();
  /** Successful claims per schedule name. */
  readonly claims = new Map<string, number>();
  /** Fire ids recorded as finished, per schedule name. */
  readonly fires = new Map<string, Set<string>>();
  /** Claims that found the slot already gone (NOT_FOUND), e.g. after a leader change. */
  lostClaims = 0;
  /** Schedules where a claim or fire RPC failed, so the store's counts are unknown: their count check is skipped. */
  readonly uncertain = new Set<string>();
  /**
   * Claims answered UNAVAILABLE during an outage, per schedule: each may or
   * may not have been stored, so FireCount may exceed the successful claims
   * by up to this many, and no more.
   */
  readonly unanswered = new Map<string, number>();

  /** Records a successful claim by `owner` of the slot due at `slot` (nanoseconds). */
  claimed(name: string, slot: bigint, owner = ""): void {
    const key = `${name}@${slot}`;
    this.slots.set(key, [...(this.slots.get(key) ?? []), owner]);
    this.claims.set(name, (this.claims.get(name) ?? 0) + 1);
  }

  /** Records a fire recorded as finished. */
  fired(name: string, fireId: string): void {
    const set = this.fires.get(name) ?? new Set();
    set.add(fireId);
    this.fires.set(name, set);
  }

  /** Total successful claims. */
  get total(): number {
    let n = 0;
    for (const c of this.claims.values()) n += c;
    return n;
  }

  /** Flags every slot claimed more than once. */
  check(violations: Violations): void {
    for (const [key, by] of this.slots) if (by.length > 1) violations.add("no slot fires twice", `${key} was claimed ${by.length} times (by ${by.join(", ")})`);
  }
}

/**
 * The scheduler of one harness process (wire-contract.md sections 4.3 and
 * 5.5): it competes for the `__scheduler__` lease; while it leads, every tick
 * it calls DueSchedules, claims each due schedule of this run with the next
 * cron instant, and records the fire's start, progress and end.
 */
export class SchedulerCandidate {
  private leading = false;

  constructor(
    private readonly ctx: WorkloadContext,
    private readonly keeper: LeaseKeeper,
    private readonly crashed: () => boolean,
    private readonly ledger: ClaimLedger,
  ) {}

  /** Runs until the run stops or the process crashes. */
  async run(): Promise<void> {
    while (!this.ctx.stop.aborted && !this.crashed()) {
      try {
        if (!this.leading) this.leading = (await this.keeper.tryAcquire(SCHEDULER_LEASE_ID)) !== undefined;
        else if (!this.keeper.holds(SCHEDULER_LEASE_ID)) this.leading = false;
        if (this.leading) await this.tick();
      } catch (err) {
        if (!(this.ctx.options.outages && isOutage(err))) this.ctx.violations.add("no unexpected errors", `${this.keeper.owner} scheduler: ${(err as Error).message}`);
      }
      await new Promise((r) => setTimeout(r, this.ctx.options.tickMs));
    }
  }

  private async tick(): Promise<void> {
    const store = this.ctx.scheduleStore!;
    const { stats } = this.ctx;
    const now = nowNanos();
    const due = await stats.time("ScheduleStoreService/DueSchedules", 0, () => store.dueSchedules(now));
    for (const s of due) {
      const name = s.Spec.Name;
      if (!name.startsWith(`${this.ctx.options.runId}-`)) continue;
      // A tick slowed down by an outage may outlive the lease; a leader that lost it must not claim beside the next one.
      if (!this.keeper.holds(SCHEDULER_LEASE_ID)) return;
      const slot = parseRfc3339(s.State.NextFireAt) ?? 0n;
      try {
        await stats.time("ScheduleStoreService/ClaimSchedule", 0, () => store.claimSchedule(name, now, cronNext(s.Spec.Trigger!.Cron!, now)), undefined, (e) => e instanceof ScheduleNotFoundError);
        this.ledger.claimed(name, slot, this.keeper.owner);
        await this.fire(name, slot, now);
      } catch (err) {
        if (err instanceof ScheduleNotFoundError) {
          this.ledger.lostClaims++;
          continue;
        }
        if (this.ctx.options.outages && isOutage(err)) {
          // Claimed or not, nobody will know: the slot is not fired (the driver leaves it pending).
          this.ledger.unanswered.set(name, (this.ledger.unanswered.get(name) ?? 0) + 1);
          continue;
        }
        this.ledger.uncertain.add(name);
        throw err;
      }
    }
  }

  private async fire(name: string, slot: bigint, now: bigint): Promise<void> {
    const store = this.ctx.scheduleStore!;
    const { stats } = this.ctx;
    const id = `sched--${name}-${slot}`;
    const fire: ScheduleFire = {
      ID: id,
      ScheduleName: name,
      SessionID: id,
      FiredAt: formatNanos(now),
      StartedAt: formatNanos(now),
      ProgressAt: ZERO_TIME,
      Deadline: formatNanos(now + 300_000_000_000n),
      Stop: "",
      Err: "",
    };
    // Each of these is idempotent (wire-contract.md section 5.5), so an outage just means sending it again.
    await throughOutages(this.ctx, () => stats.time("ScheduleStoreService/RecordFireStart", 0, () => store.recordFireStart(name, fire)));
    const progress = nowNanos();
    await throughOutages(this.ctx, () => stats.time("ScheduleStoreService/RecordFireProgress", 0, () => store.recordFireProgress(name, id, progress)));
    await throughOutages(this.ctx, () => stats.time("ScheduleStoreService/RecordFire", 0, () => store.recordFire({ ...fire, ProgressAt: formatOptionalNanos(progress), Stop: "end_turn" })));
    this.ledger.fired(name, id);
  }
}
