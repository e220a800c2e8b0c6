import type { RedisClient } from "../storage/redis-client.js";
import type { RedisKeys } from "../storage/redis-keys.js";
import { fireIndexPrefix } from "../storage/redis-keys.js";
import { RedisOperations } from "../storage/redis-operation.js";
import { CommitPlan } from "./redis-commit.js";
import { FireMutations } from "./redis-fire.js";
import { decodeReply, encodeReply, planSchedule, SCHEDULE_FIELDS, snapshotSchedule, toDocument } from "./redis-schedule-record.js";
import { applyMutation, dueIndexKeyAt, isDue, mutationTargets, type ScheduleMutation } from "./rules.js";
import { parseFire, type ScheduleDocument } from "./schedule.js";
import type { ScheduleStore, StoreReply } from "./store.js";
import { distinctBy, indexScan, SCAN_PAGE_ENTRIES, type IndexScan } from "../storage/index-scan.js";
import { loadInBatches, mergedLexIndex, mergedScoreIndex } from "../storage/redis-index-page.js";

/** Commit attempts per mutation before answering `contended`. */
export const MAX_COMMIT_ATTEMPTS = 64;

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/**
 * ScheduleStore on Redis. Layout (keys in redis-keys.ts): a hash per
 * schedule (`spec` verbatim, `owned`, `max_fires`, `state`, `ver`) in the
 * partition of its name, a hash per fire record (`payload`, `ver`, and a
 * lock while a mutation holds it) in the partition of its id, and three
 * indexes split into one sorted set per partition (issue 13): all names
 * (ListSchedules) and the fire records by schedule name (ListFires), every
 * score 0 so they page in byte order, and the schedules that can be due
 * scored by NextFireAt in milliseconds (Due; candidates are re-checked to
 * the nanosecond). A read merges the partitions (k-way, a page at a time,
 * issue 10), so a Due page reads the due entries plus one page per
 * partition.
 *
 * Atomicity is optimistic compare-and-set, because the rules are TypeScript
 * and cannot run inside Redis: read the schedule hash with its `ver`, apply
 * the rule, then run the commit script (redis-commit.ts), which writes the
 * schedule and its index entries (all on the schedule's slot) only if the
 * version is unchanged, and bumps it. A lost race re-reads and
 * re-applies; after {@link MAX_COMMIT_ATTEMPTS} the reply is `contended`.
 * This needs no connection beyond the shared client (no WATCH).
 *
 * Exactly once (issue 9): one mutation is one {@link RedisOperation}. Every
 * commit attempt carries its operation record and records the reply of the
 * rule as applied by that attempt; every read of the loop reads the record
 * first. So when a commit's reply is lost, the retry (read again, or commit
 * again) returns what that commit decided, instead of judging the mutation
 * again against its own result (a claim that finds its own claim, a re-arm
 * counted twice). Past `--store-timeout` the mutation fails with a
 * StoreFailure (UNAVAILABLE).
 *
 * A fire record is keyed by its own id (LoadFire needs only the id), so it
 * lives on another slot than the schedule a fire mutation changes with it:
 * those mutations go through the two-phase commit of redis-fire.ts, which
 * keeps them atomic on a Redis Cluster.
 */
export class RedisScheduleStore implements ScheduleStore {
  private readonly ops: RedisOperations;
  private readonly fires: FireMutations;

  /** @param storeTimeoutMs `--store-timeout` in milliseconds. */
  constructor(
    redis: RedisClient,
    private readonly keys: RedisKeys,
    storeTimeoutMs: number,
  ) {
    this.ops = new RedisOperations(redis, storeTimeoutMs);
    this.fires = new FireMutations(this.ops, keys, MAX_COMMIT_ATTEMPTS);
  }

  async mutate(m: ScheduleMutation): Promise<StoreReply> {
    const { scheduleName, fireId } = mutationTargets(m);
    if (fireId !== undefined) return this.fires.mutate(m, scheduleName, fireId);
    const op = this.ops.begin();
    const record = op.record(this.keys.scheduleOp(scheduleName, op.id));
    for (let attempt = 1; attempt <= MAX_COMMIT_ATTEMPTS; attempt++) {
      const snap = await snapshotSchedule(op, this.keys, record.key, scheduleName);
      if ("recorded" in snap) return decodeReply(scheduleName, snap.recorded);
      const t = applyMutation(m, snap.schedule, undefined);
      if (t.schedule === undefined) return t.reply;
      const plan = new CommitPlan().guard(this.keys.schedule(scheduleName), snap.ver);
      planSchedule(plan, this.keys, scheduleName, t.schedule);
      const committed = await plan.commit(op, record, encodeReply(t.reply));
      if (committed !== "stale" && committed !== "fenced") return decodeReply(scheduleName, committed.committed);
      // Lost a race: back off a little once it keeps happening, then re-read.
      if (attempt > 2) await sleep(Math.random() * Math.min(2 ** attempt, 20));
    }
    return { ok: false, error: "contended" };
  }

  async load(name: string): Promise<ScheduleDocument | undefined> {
    return toDocument(name, await this.ops.read((r) => r.hmget(this.keys.schedule(name), ...SCHEDULE_FIELDS)));
  }

  /** Loads the schedules of one index page, a bounded batch at a time; names whose schedule is gone are skipped. */
  private loadPage(names: readonly string[]): AsyncGenerator<ScheduleDocument, void, undefined> {
    return loadInBatches(this.ops, names, (n) => this.keys.schedule(n), "spec", (n) => this.load(n));
  }

  /** Partition keys of an index, one per partition. */
  private parts(index: (p: number) => string): string[] {
    return this.keys.layout.all().map(index);
  }

  /** Sums `count` over the partitions of an index. */
  private async total(keys: string[], count: (key: string) => Promise<number>): Promise<number> {
    return (await Promise.all(keys.map(count))).reduce((a, b) => a + b, 0);
  }

  /** Pages through the name index in byte order, merging its partitions. */
  scan(): IndexScan<ScheduleDocument> {
    const parts = this.parts((p) => this.keys.scheduleIndex(p));
    const self = this;
    return indexScan(
      async function* () {
        for await (const names of pagesOf(mergedLexIndex(self.ops, parts))) yield* self.loadPage(names);
      },
      () => this.total(parts, (k) => this.ops.read((r) => r.zcard(k))),
    );
  }

  /**
   * Pages through the Due index in (NextFireAt ms, name) order up to `now`,
   * merging its partitions; a schedule claimed ahead of the scan with a fire
   * still due is kept at its first sighting.
   */
  scanDue(now: bigint): AsyncIterable<ScheduleDocument> {
    const self = this;
    const parts = this.parts((p) => this.keys.scheduleDueIndex(p));
    async function* candidates() {
      for await (const page of pagesOf(mergedScoreIndex(self.ops, parts, Number(dueIndexKeyAt(now))))) {
        for await (const s of self.loadPage(page.map((e) => e.member))) if (isDue(s, now)) yield s;
      }
    }
    return distinctBy(candidates(), (s) => s.name);
  }

  loadFire(fireId: string): Promise<string | undefined> {
    return this.fires.load(fireId);
  }

  /** Pages through the fire records indexed under the schedule's name, in fire id byte order, merging the index's partitions. */
  async scanFires(scheduleName: string): Promise<IndexScan<string> | undefined> {
    if ((await this.ops.read((r) => r.hexists(this.keys.schedule(scheduleName), "spec"))) !== 1) return undefined;
    const parts = this.parts((p) => this.keys.fireIndex(p));
    const prefix = fireIndexPrefix(scheduleName);
    const self = this;
    return indexScan(
      async function* () {
        for await (const ids of pagesOf(mergedLexIndex(self.ops, parts, prefix))) {
          for await (const text of loadInBatches(self.ops, ids, (id) => self.keys.scheduleFire(id), "payload", (id) => self.loadFire(id))) {
            // A record can move to another schedule between the index read and the load; keep only this schedule's.
            if (parseFire(text).scheduleName === scheduleName) yield text;
          }
        }
      },
      () => {
        const end = Buffer.concat([Buffer.from(`[${prefix}`, "utf8"), Buffer.of(0xff)]);
        return this.total(parts, (k) => this.ops.read((r) => r.zlexcount(k, `[${prefix}`, end)));
      },
    );
  }
}

/** Groups a merged index back into pages of up to SCAN_PAGE_ENTRIES, for the batched record loads. */
async function* pagesOf<E>(entries: AsyncIterable<E>): AsyncGenerator<E[], void, undefined> {
  let page: E[] = [];
  for await (const e of entries) {
    page.push(e);
    if (page.length >= SCAN_PAGE_ENTRIES) {
      yield page;
      page = [];
    }
  }
  if (page.length > 0) yield page;
}
