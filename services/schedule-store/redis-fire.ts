/**
 * Fire mutations on Redis (issue 13): RecordFire, RecordFireStart and
 * RecordFireProgress change a schedule and a fire record together, and the
 * two live in different partitions (a fire record is found by its id alone,
 * so it sits in the partition of its id; the schedule in that of its name),
 * hence on different slots of a Redis Cluster, where no script may touch
 * both. The change is made atomic by a two-phase commit whose decision is
 * one key beside the schedule:
 *
 * 1. **Lock** the fire record ({@link FIRE_LOCK}, fire's slot): it names the
 *    operation holding it, the schedule whose fence decides for it, and an
 *    expiry. The record as read under the lock is the one the rule sees; no
 *    other mutation changes it until the lock is gone, and reads of it wait.
 * 2. **Commit** the schedule (CommitPlan, schedule's slot): the schedule's
 *    writes (guarded by its version), the operation record with the rule's
 *    reply, and the **fence** `RedisKeys.scheduleFence(name, op)` holding
 *    what to write to the fire record (the *intent*), on condition that no
 *    fence exists yet. From here the mutation has happened.
 * 3. **Apply** the intent to the fire record and release the lock
 *    ({@link FIRE_APPLY}, fire's slot), then drop the fence.
 *
 * A lock whose holder died or stalled past its expiry (twice
 * `--store-timeout` plus a second: a live holder's operation has ended by
 * then) is settled by whoever meets it ({@link FireMutations.settle}): it
 * sets the fence to `a` (given up) unless it exists; if the fence holds an
 * intent the commit happened and the intent is applied (roll forward), if it
 * holds `a` the lock is released unchanged (roll back). The fence is set at
 * most once, so a commit that arrives after it was given up finds the fence
 * and writes nothing: no clock needs to agree across nodes. An abort fence
 * expires after `opRecordTtlMs`; a commit fence lives until its intent is
 * applied.
 *
 * Every script carries an operation record in its own slot (a step name in
 * the key), so a retried step is applied once.
 */
import type { RedisKeys } from "../storage/redis-keys.js";
import { fireIndexMember } from "../storage/redis-keys.js";
import type { RedisOperation, RedisOperations } from "../storage/redis-operation.js";
import { opRecordTtlMs, redisScript } from "../storage/redis-script.js";
import { StoreFailure } from "../storage/store-failure.js";
import { CommitPlan } from "./redis-commit.js";
import { decodeReply, encodeReply, planSchedule, snapshotSchedule } from "./redis-schedule-record.js";
import { applyMutation, type ScheduleMutation } from "./rules.js";
import { parseFire, type FireDocument } from "./schedule.js";
import type { StoreReply } from "./store.js";

/**
 * Locks a fire record for one operation, or says who holds it.
 * KEYS[1] fire record hash, KEYS[2] its ListFires index partition.
 * ARGV[1] operation id, ARGV[2] lock lifetime in milliseconds, ARGV[3]
 * name of the schedule whose fence decides for the operation, ARGV[4] index
 * member to add at once (so ListFires finds the record while the operation
 * runs; removed again if the record ends up elsewhere) or empty.
 * Returns {`held`, payload or empty, 1 when the record exists else 0}
 * (recorded) once the operation holds the lock, or {`busy`, holder's
 * operation id, holder's schedule name, 1 when the holder's lock has
 * expired else 0} (not recorded).
 */
const FIRE_LOCK = redisScript({
  name: "mecatlFireLock",
  lua: `
local f = redis.call('HMGET', KEYS[1], 'payload', 'lk', 'lkt', 'lks')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if f[2] and f[2] ~= ARGV[1] then
  return {'busy', f[2], f[4] or '', (now >= tonumber(f[3])) and 1 or 0}
end
if not f[2] then
  local added = ''
  if ARGV[4] ~= '' and redis.call('ZADD', KEYS[2], 'NX', 0, ARGV[4]) == 1 then added = ARGV[4] end
  redis.call('HSET', KEYS[1], 'lk', ARGV[1], 'lkt', string.format('%d', now + tonumber(ARGV[2])), 'lks', ARGV[3], 'lkm', added)
end
return op_done({'held', f[1] or '', f[1] and 1 or 0})
`,
});

/**
 * Applies an operation's intent to the fire record it locked and releases
 * the lock; with an empty intent, only releases it (and takes back the
 * index member the lock added).
 * KEYS[1] fire record hash, KEYS[2] its ListFires index partition.
 * ARGV[1] the holder's operation id, ARGV[2] the record's new text or empty
 * (unchanged), ARGV[3] index member to remove or empty, ARGV[4] index member
 * to add or empty.
 * Returns 1 when applied, 0 when the lock is not that operation's (applied
 * or released before); recorded either way.
 */
const FIRE_APPLY = redisScript({
  name: "mecatlFireApply",
  lua: `
local f = redis.call('HMGET', KEYS[1], 'lk', 'lkm')
if f[1] ~= ARGV[1] then return op_done(0) end
if ARGV[2] ~= '' then
  redis.call('HSET', KEYS[1], 'payload', ARGV[2])
  redis.call('HINCRBY', KEYS[1], 'ver', 1)
end
if ARGV[3] ~= '' and ARGV[3] ~= ARGV[4] then redis.call('ZREM', KEYS[2], ARGV[3]) end
if ARGV[4] ~= '' then redis.call('ZADD', KEYS[2], 0, ARGV[4]) end
if f[2] and f[2] ~= '' and f[2] ~= ARGV[4] then redis.call('ZREM', KEYS[2], f[2]) end
redis.call('HDEL', KEYS[1], 'lk', 'lkt', 'lks', 'lkm')
if redis.call('HEXISTS', KEYS[1], 'payload') == 0 then redis.call('DEL', KEYS[1]) end
return op_done(1)
`,
});

/**
 * Decides the fate of another operation's fire mutation whose lock expired:
 * gives it up by setting its fence to `a` (expiring after ARGV[1] ms),
 * unless the fence is already set.
 * KEYS[1] the fence.
 * Returns the fence's value: an intent (the operation committed), or `a`.
 */
const FENCE_SETTLE = redisScript({
  name: "mecatlFenceSettle",
  lua: `
local v = redis.call('GET', KEYS[1])
if v then return v end
redis.call('SET', KEYS[1], 'a', 'PX', ARGV[1])
return op_done('a')
`,
});

/**
 * Removes a commit fence once its intent is applied.
 * KEYS[1] the fence.
 * Returns 1 (recorded).
 */
const FENCE_DROP = redisScript({
  name: "mecatlFenceDrop",
  lua: `
redis.call('DEL', KEYS[1])
return op_done(1)
`,
});

/**
 * Reads a fire record and its lock.
 * KEYS[1] fire record hash.
 * Returns {payload or empty, 1 when it exists else 0, holder's operation id
 * or empty, holder's schedule name or empty, 1 when the lock has expired}.
 */
const FIRE_READ = redisScript({
  name: "mecatlFireRead",
  readOnly: true,
  lua: `
local f = redis.call('HMGET', KEYS[1], 'payload', 'lk', 'lkt', 'lks')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expired = (f[2] and now >= tonumber(f[3])) and 1 or 0
return {f[1] or '', f[1] and 1 or 0, f[2] or '', f[4] or '', expired}
`,
});

/** What to write to a fire record when its schedule's commit lands (kept in the fence). */
interface Intent {
  /** The record's new text, or empty when it does not change. */
  p: string;
  /** Index member to remove, or empty. */
  r: string;
  /** Index member to add, or empty. */
  a: string;
}

const NO_CHANGE: Intent = { p: "", r: "", a: "" };

/** The fire record a mutation writes whole (RecordFire, RecordFireStart), whose ScheduleName is known before the rule runs. */
function incomingFire(m: ScheduleMutation): FireDocument | undefined {
  return m.kind === "recordFire" || m.kind === "recordFireStart" ? m.fire : undefined;
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/**
 * The fire-record side of the Redis schedule store: fire mutations by the
 * two-phase commit above, and reads of fire records that wait out (or
 * settle) a lock.
 */
export class FireMutations {
  /** Milliseconds a fire lock lives: twice --store-timeout plus a second. */
  private readonly lockMs: number;
  private readonly abortMs: number;

  /**
   * @param ops the store's operations.
   * @param keys the store's key layout.
   * @param maxCommitAttempts commits tried before answering `contended`.
   */
  constructor(
    private readonly ops: RedisOperations,
    private readonly keys: RedisKeys,
    private readonly maxCommitAttempts: number,
  ) {
    this.lockMs = 2 * ops.timeoutMs + 1000;
    this.abortMs = opRecordTtlMs(ops.timeoutMs);
  }

  /** The step record of `op` on fire `fireId`. */
  private step(op: RedisOperation, fireId: string, step: string) {
    return op.record(this.keys.fireOp(fireId, op.id, step));
  }

  /**
   * Settles the lock of operation `holder` (whose schedule is `holderSchedule`)
   * on `fireId`, which has expired: rolls its mutation forward or back as
   * its fence says (see the module comment).
   *
   * @throws StoreFailure when Redis fails past --store-timeout.
   */
  async settle(fireId: string, holder: string, holderSchedule: string): Promise<void> {
    const op = this.ops.begin();
    const fence = this.keys.scheduleFence(holderSchedule, holder);
    const value = (await op.script(FENCE_SETTLE, [fence], [this.abortMs], op.record(this.keys.scheduleOp(holderSchedule, op.id)))) as string;
    const intent = value === "a" ? NO_CHANGE : (JSON.parse(value) as Intent);
    await this.apply(op, fireId, holder, intent);
    if (value !== "a") await op.script(FENCE_DROP, [fence], [], op.record(this.keys.scheduleOp(holderSchedule, `${op.id}-drop`)));
  }

  private apply(op: RedisOperation, fireId: string, holder: string, intent: Intent): Promise<unknown> {
    return op.script(FIRE_APPLY, [this.keys.scheduleFire(fireId), this.keys.fireIndexOf(fireId)], [holder, intent.p, intent.r, intent.a], this.step(op, fireId, `apply-${holder}`));
  }

  /**
   * Takes the lock on `fireId` for `op`: waits while another live operation
   * holds it, settles it once expired.
   *
   * @returns the record as read under the lock, or `contended` when the
   *   lock could not be had before `deadline` (milliseconds, `Date.now()`).
   */
  private async lock(op: RedisOperation, fireId: string, scheduleName: string, provisional: string, deadline: number): Promise<{ fire?: FireDocument } | "contended"> {
    const keys = [this.keys.scheduleFire(fireId), this.keys.fireIndexOf(fireId)];
    for (let wait = 5; ; wait = Math.min(wait * 2, 100)) {
      const r = (await op.script(FIRE_LOCK, keys, [op.id, this.lockMs, scheduleName, provisional], this.step(op, fireId, "lock"))) as [string, string, string | number, number];
      if (r[0] === "held") return { fire: r[2] === 1 ? parseFire(r[1]) : undefined };
      if (r[3] === 1) await this.settle(fireId, r[1], String(r[2]));
      else if (Date.now() + wait > deadline) return "contended";
      else await sleep(wait);
    }
  }

  /**
   * Applies fire mutation `m` (see rules.ts `mutationTargets`) to schedule
   * `scheduleName` and fire record `fireId` by the two-phase commit of the
   * module comment.
   *
   * @returns the rule's reply, or `contended` when the lock could not be had
   *   in time or the schedule kept changing (nothing written either way).
   * @throws StoreFailure when Redis fails past --store-timeout (the commit
   *   may then have happened: a later access settles it), or when the
   *   operation outlived its lock and another process gave it up (nothing
   *   written).
   */
  async mutate(m: ScheduleMutation, scheduleName: string, fireId: string): Promise<StoreReply> {
    const op = this.ops.begin();
    const deadline = Date.now() + this.ops.timeoutMs;
    const incoming = incomingFire(m);
    const locked = await this.lock(op, fireId, scheduleName, incoming === undefined ? "" : fireIndexMember(incoming.scheduleName, fireId), deadline);
    if (locked === "contended") return { ok: false, error: "contended" };
    const release = () => this.apply(op, fireId, op.id, NO_CHANGE);
    let commitSent = false;
    try {
      return await this.decide(op, m, scheduleName, fireId, locked.fire, () => (commitSent = true), release);
    } catch (err) {
      // Unless a commit may have landed (its fence then decides), the lock can go at once.
      if (!commitSent) await release().catch(() => undefined);
      throw err;
    }
  }

  /** Steps 2 and 3 of {@link mutate}, under the lock; `sending` is called before each commit is sent. */
  private async decide(op: RedisOperation, m: ScheduleMutation, scheduleName: string, fireId: string, fire: FireDocument | undefined, sending: () => void, release: () => Promise<unknown>): Promise<StoreReply> {
    const record = op.record(this.keys.scheduleOp(scheduleName, op.id));
    const fence = this.keys.scheduleFence(scheduleName, op.id);
    for (let attempt = 1; attempt <= this.maxCommitAttempts; attempt++) {
      const snap = await snapshotSchedule(op, this.keys, record.key, scheduleName);
      if ("recorded" in snap) {
        // An earlier attempt of this operation committed and its answer was lost: finish it.
        await this.finish(op, fireId, fence, scheduleName);
        return decodeReply(scheduleName, snap.recorded);
      }
      const t = applyMutation(m, snap.schedule, fire);
      if (t.schedule === undefined && t.fire === undefined) {
        await release();
        return t.reply;
      }
      const intent: Intent = { ...NO_CHANGE };
      if (t.fire !== undefined) {
        intent.p = t.fire.text;
        intent.a = fireIndexMember(t.fire.scheduleName, fireId);
        if (fire !== undefined) intent.r = fireIndexMember(fire.scheduleName, fireId);
      }
      const plan = new CommitPlan().guard(this.keys.schedule(scheduleName), snap.ver).absent(fence);
      if (t.schedule !== undefined) planSchedule(plan, this.keys, scheduleName, t.schedule);
      plan.write("SET", fence, JSON.stringify(intent));
      sending();
      const committed = await plan.commit(op, record, encodeReply(t.reply));
      if (committed === "fenced") throw new StoreFailure("unreachable", `the fire record's lock outlived this call and was given up by another process; nothing was written`);
      if (committed !== "stale") {
        await this.apply(op, fireId, op.id, intent);
        await op.script(FENCE_DROP, [fence], [], op.record(this.keys.scheduleOp(scheduleName, `${op.id}-drop`)));
        return decodeReply(scheduleName, committed.committed);
      }
      if (attempt > 2) await sleep(Math.random() * Math.min(2 ** attempt, 20));
    }
    await release();
    return { ok: false, error: "contended" };
  }

  /** Applies the intent an earlier attempt of `op` left in `fence`, then drops the fence. */
  private async finish(op: RedisOperation, fireId: string, fence: string, scheduleName: string): Promise<void> {
    const value = await op.read((r) => r.get(fence));
    if (value === null || value === "a") return;
    await this.apply(op, fireId, op.id, JSON.parse(value) as Intent);
    await op.script(FENCE_DROP, [fence], [], op.record(this.keys.scheduleOp(scheduleName, `${op.id}-drop`)));
  }

  /**
   * The text of fire record `fireId`, or undefined. A record locked by a
   * running mutation is read once the lock is gone (so a read never sees the
   * schedule changed and the record not yet); an expired lock is settled
   * first.
   *
   * @throws StoreFailure when Redis fails, or the lock outlives --store-timeout.
   */
  async load(fireId: string): Promise<string | undefined> {
    const deadline = Date.now() + this.ops.timeoutMs;
    for (let wait = 5; ; wait = Math.min(wait * 2, 100)) {
      const [payload, exists, holder, holderSchedule, expired] = (await this.ops.readScript(FIRE_READ, [this.keys.scheduleFire(fireId)], [])) as [string, number, string, string, number];
      if (holder === "") return exists === 1 ? payload : undefined;
      if (expired === 1) await this.settle(fireId, holder, holderSchedule);
      else if (Date.now() + wait > deadline) throw new StoreFailure("unreachable", `fire record ${JSON.stringify(fireId)} stayed locked by a running mutation for ${this.ops.timeoutMs} ms`);
      else await sleep(wait);
    }
  }
}
