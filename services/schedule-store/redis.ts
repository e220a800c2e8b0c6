import type { RedisClient } from "../storage/redis-client.js";
import type { RedisKeys } from "../storage/redis-keys.js";
import { RedisOperations, type RedisOperation } from "../storage/redis-operation.js";
import { redisScript } from "../storage/redis-script.js";
import { CommitPlan } from "./redis-commit.js";
import { applyMutation, dueIndexKey, dueIndexKeyAt, isDue, mutationTargets, type MutationReply, type RuleError, type ScheduleMutation } from "./rules.js";
import { decodeState, encodeState, parseFire, type FireDocument, type ScheduleDocument } from "./schedule.js";
import type { ScheduleStore, StoreReply } from "./store.js";
import { distinctBy, indexScan, type IndexScan } from "../storage/index-scan.js";
import { lexIndexPages, loadInBatches, scoreIndexPages } from "../storage/redis-index-page.js";

/** Commit attempts per mutation before answering `contended`. */
export const MAX_COMMIT_ATTEMPTS = 64;

const SCHEDULE_FIELDS = ["ver", "spec", "owned", "max_fires", "state"] as const;

type ScheduleFields = Array<string | null>;

function toDocument(name: string, f: ScheduleFields): ScheduleDocument | undefined {
  const [, spec, owned, maxFires, state] = f;
  if (spec == null || state == null) return undefined;
  return { name, specText: spec, placementOwned: owned === "1", maxFires: BigInt(maxFires ?? "0"), state: decodeState(state) };
}

/**
 * A rule's reply as recorded with the commit that applied it: JSON
 * `{"e": error}` for a refusal, `{"s": [spec, owned, max_fires, state]}`
 * when it carries the schedule (fields as in the schedule hash), `{}` for a
 * bare OK.
 */
function encodeReply(reply: MutationReply): string {
  if (!reply.ok) return JSON.stringify({ e: reply.error });
  const s = reply.schedule;
  if (s === undefined) return "{}";
  return JSON.stringify({ s: [s.specText, s.placementOwned ? "1" : "0", s.maxFires.toString(), encodeState(s.state)] });
}

/** Inverse of {@link encodeReply}; `name` is the schedule the mutation targeted. */
function decodeReply(name: string, text: string): MutationReply {
  const r = JSON.parse(text) as { e?: RuleError; s?: string[] };
  if (r.e !== undefined) return { ok: false, error: r.e };
  return r.s === undefined ? { ok: true } : { ok: true, schedule: toDocument(name, [null, ...r.s])! };
}

/**
 * Reads what a mutation needs, atomically: the operation's record and, if
 * there is none, the schedule's fields and the fire record's.
 * KEYS[1] schedule hash, KEYS[2] the operation record, KEYS[3] fire record
 * hash (optional).
 * Returns {1, recorded reply} when the operation was already applied, else
 * {0, {ver, spec, owned, max_fires, state}, {ver, payload} (with KEYS[3])}.
 */
const SNAPSHOT = redisScript({
  name: "mecatlScheduleSnapshot",
  readOnly: true,
  lua: `
local recorded = redis.call('GET', KEYS[2])
if recorded then return {1, cmsgpack.unpack(recorded)} end
local out = {0, redis.call('HMGET', KEYS[1], 'ver', 'spec', 'owned', 'max_fires', 'state')}
if KEYS[3] then out[3] = redis.call('HMGET', KEYS[3], 'ver', 'payload') end
return out
`,
});

/** One consistent read of the records a mutation targets, with their commit versions. */
interface Snapshot {
  schedule?: ScheduleDocument;
  scheduleVer: string;
  fire?: FireDocument;
  fireVer: string;
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/**
 * ScheduleStore on Redis. Layout (keys in redis-keys.ts): a hash per
 * schedule (`spec` verbatim, `owned`, `max_fires`, `state`, `ver`), a hash
 * per fire record (`payload`, `ver`), a sorted set of fire ids per schedule
 * (ListFires index) and one of all names (List index), both with every score
 * 0 so they page in byte order, and a sorted set of the schedules that can be
 * due scored by NextFireAt in milliseconds (Due index; candidates are
 * re-checked to the nanosecond). Every index is read a page at a time
 * (issue 10).
 *
 * Atomicity is optimistic compare-and-set, because the rules are TypeScript
 * and cannot run inside Redis: read the schedule and fire hashes with their
 * `ver` in one script, apply the rule, then run the commit script
 * (redis-commit.ts), which writes only if both versions are unchanged and
 * bumps the version of each record it writes. A lost race re-reads and
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
 * A fire record is keyed by its own id (LoadFire needs only the id) and is
 * guarded by its own version, so RecordFire, which finds its schedule through
 * the record's ScheduleName, touches the schedule and the fire atomically.
 *
 * Redis Cluster: the indexes are global keys, so the commit script spans
 * slots; like the session store, this layout targets a standalone Redis (a
 * cluster layout would need per-slot indexes).
 */
export class RedisScheduleStore implements ScheduleStore {
  private readonly ops: RedisOperations;

  /** @param storeTimeoutMs `--store-timeout` in milliseconds. */
  constructor(
    redis: RedisClient,
    private readonly keys: RedisKeys,
    storeTimeoutMs: number,
  ) {
    this.ops = new RedisOperations(redis, storeTimeoutMs);
  }

  /** The recorded reply of `op` if it was applied already, else a snapshot of its targets. */
  private async snapshot(op: RedisOperation, recordKey: string, scheduleName: string, fireId: string | undefined): Promise<{ recorded: string } | Snapshot> {
    const keys = [this.keys.schedule(scheduleName), recordKey];
    if (fireId !== undefined) keys.push(this.keys.scheduleFire(fireId));
    const [recorded, sched, fire] = (await op.script(SNAPSHOT, keys, [])) as [number, ScheduleFields | string, Array<string | null> | undefined];
    if (recorded === 1) return { recorded: sched as string };
    const f = sched as ScheduleFields;
    return {
      schedule: toDocument(scheduleName, f),
      scheduleVer: f[0] ?? "0",
      fire: fire?.[1] == null ? undefined : parseFire(fire[1]),
      fireVer: fire?.[0] ?? "0",
    };
  }

  /** Adds the writes that store `s` (or delete the schedule `name` when `s` is null) and keep the indexes right. */
  private planSchedule(plan: CommitPlan, name: string, s: ScheduleDocument | null): void {
    const key = this.keys.schedule(name);
    if (s === null) {
      for (const f of ["spec", "owned", "max_fires", "state"]) plan.write("HDEL", key, f);
      plan.write("ZREM", this.keys.scheduleIndex(), name);
      plan.write("ZREM", this.keys.scheduleDueIndex(), name);
    } else {
      plan.write("HSET", key, "spec", s.specText).write("HSET", key, "owned", s.placementOwned ? "1" : "0");
      plan.write("HSET", key, "max_fires", s.maxFires.toString()).write("HSET", key, "state", encodeState(s.state));
      plan.write("ZADD", this.keys.scheduleIndex(), "0", name);
      const due = dueIndexKey(s);
      if (due === undefined) plan.write("ZREM", this.keys.scheduleDueIndex(), name);
      else plan.write("ZADD", this.keys.scheduleDueIndex(), due.toString(), name);
    }
    plan.write("HINCRBY", key, "ver", "1");
  }

  /** Adds the writes that store fire `f`, moving it between ListFires sets if its ScheduleName changed. */
  private planFire(plan: CommitPlan, f: FireDocument, previous: FireDocument | undefined): void {
    const key = this.keys.scheduleFire(f.id);
    plan.write("HSET", key, "payload", f.text).write("HINCRBY", key, "ver", "1");
    plan.write("ZADD", this.keys.scheduleFires(f.scheduleName), "0", f.id);
    if (previous !== undefined && previous.scheduleName !== f.scheduleName) plan.write("ZREM", this.keys.scheduleFires(previous.scheduleName), f.id);
  }

  async mutate(m: ScheduleMutation): Promise<StoreReply> {
    const { scheduleName, fireId } = mutationTargets(m);
    const op = this.ops.begin();
    const record = op.record(this.keys.scheduleOp(scheduleName, op.id));
    for (let attempt = 1; attempt <= MAX_COMMIT_ATTEMPTS; attempt++) {
      const snap = await this.snapshot(op, record.key, scheduleName, fireId);
      if ("recorded" in snap) return decodeReply(scheduleName, snap.recorded);
      const t = applyMutation(m, snap.schedule, snap.fire);
      const plan = new CommitPlan().guard(this.keys.schedule(scheduleName), snap.scheduleVer);
      if (fireId !== undefined) plan.guard(this.keys.scheduleFire(fireId), snap.fireVer);
      if (t.schedule !== undefined) this.planSchedule(plan, scheduleName, t.schedule);
      if (t.fire !== undefined) this.planFire(plan, t.fire, snap.fire);
      if (plan.empty) return t.reply;
      const committed = await plan.commit(op, record, encodeReply(t.reply));
      if (committed !== undefined) return decodeReply(scheduleName, committed);
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

  /** Pages through the name index in byte order. */
  scan(): IndexScan<ScheduleDocument> {
    const index = this.keys.scheduleIndex();
    const self = this;
    return indexScan(
      async function* () {
        for await (const names of lexIndexPages(self.ops, index)) yield* self.loadPage(names);
      },
      () => this.ops.read((r) => r.zcard(index)),
    );
  }

  /** Pages through the Due index in (NextFireAt ms, name) order up to `now`; a schedule claimed ahead of the scan with a fire still due is kept at its first sighting. */
  scanDue(now: bigint): AsyncIterable<ScheduleDocument> {
    const self = this;
    async function* candidates() {
      for await (const page of scoreIndexPages(self.ops, self.keys.scheduleDueIndex(), Number(dueIndexKeyAt(now)))) {
        for await (const s of self.loadPage(page.map((e) => e.member))) if (isDue(s, now)) yield s;
      }
    }
    return distinctBy(candidates(), (s) => s.name);
  }

  async loadFire(fireId: string): Promise<string | undefined> {
    return (await this.ops.read((r) => r.hget(this.keys.scheduleFire(fireId), "payload"))) ?? undefined;
  }

  /** Pages through the schedule's fire-id index in byte order. */
  async scanFires(scheduleName: string): Promise<IndexScan<string> | undefined> {
    if ((await this.ops.read((r) => r.hexists(this.keys.schedule(scheduleName), "spec"))) !== 1) return undefined;
    const index = this.keys.scheduleFires(scheduleName);
    const self = this;
    return indexScan(
      async function* () {
        for await (const ids of lexIndexPages(self.ops, index)) {
          for await (const text of loadInBatches(self.ops, ids, (id) => self.keys.scheduleFire(id), "payload", (id) => self.loadFire(id))) {
            // A record can move to another schedule between the index read and the load; keep only this schedule's.
            if (parseFire(text).scheduleName === scheduleName) yield text;
          }
        }
      },
      () => this.ops.read((r) => r.zcard(index)),
    );
  }
}
