import type { RedisKeys } from "../storage/redis-keys.js";
import type { RedisOperation } from "../storage/redis-operation.js";
import { redisScript } from "../storage/redis-script.js";
import type { CommitPlan } from "./redis-commit.js";
import { dueIndexKey, type MutationReply, type RuleError } from "./rules.js";
import { decodeState, encodeState, type ScheduleDocument } from "./schedule.js";

/** The fields of a schedule hash, in the order {@link toDocument} reads them. */
export const SCHEDULE_FIELDS = ["ver", "spec", "owned", "max_fires", "state"] as const;

/** Values of {@link SCHEDULE_FIELDS}, as HMGET returns them. */
export type ScheduleFields = Array<string | null>;

/** The schedule named `name` from its hash fields, or undefined when it does not exist. */
export function toDocument(name: string, f: ScheduleFields): ScheduleDocument | undefined {
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
export function encodeReply(reply: MutationReply): string {
  if (!reply.ok) return JSON.stringify({ e: reply.error });
  const s = reply.schedule;
  if (s === undefined) return "{}";
  return JSON.stringify({ s: [s.specText, s.placementOwned ? "1" : "0", s.maxFires.toString(), encodeState(s.state)] });
}

/** Inverse of {@link encodeReply}; `name` is the schedule the mutation targeted. */
export function decodeReply(name: string, text: string): MutationReply {
  const r = JSON.parse(text) as { e?: RuleError; s?: string[] };
  if (r.e !== undefined) return { ok: false, error: r.e };
  return r.s === undefined ? { ok: true } : { ok: true, schedule: toDocument(name, [null, ...r.s])! };
}

/**
 * Reads what a mutation needs of its schedule, atomically: the operation's
 * record and, if there is none, the schedule's fields.
 * KEYS[1] schedule hash, KEYS[2] the operation record.
 * Returns {1, recorded reply} when the operation was already applied, else
 * {0, {ver, spec, owned, max_fires, state}}.
 */
const SNAPSHOT = redisScript({
  name: "mecatlScheduleSnapshot",
  readOnly: true,
  lua: `
local recorded = redis.call('GET', KEYS[2])
if recorded then return {1, cmsgpack.unpack(recorded)} end
return {0, redis.call('HMGET', KEYS[1], 'ver', 'spec', 'owned', 'max_fires', 'state')}
`,
});

/** One consistent read of a schedule with its commit version, or the recorded reply of an operation already applied. */
export type ScheduleSnapshot = { recorded: string } | { schedule?: ScheduleDocument; ver: string };

/** Reads schedule `name` for operation `op`, whose record is `recordKey` (see {@link SNAPSHOT}). */
export async function snapshotSchedule(op: RedisOperation, keys: RedisKeys, recordKey: string, name: string): Promise<ScheduleSnapshot> {
  const [recorded, fields] = (await op.script(SNAPSHOT, [keys.schedule(name), recordKey], [])) as [number, ScheduleFields | string];
  if (recorded === 1) return { recorded: fields as string };
  const f = fields as ScheduleFields;
  return { schedule: toDocument(name, f), ver: f[0] ?? "0" };
}

/**
 * Adds to `plan` the writes that store `s` under `name` (or delete the
 * schedule when `s` is null) and keep its ListSchedules and Due index
 * entries right, all in the schedule's partition, then bumps its version.
 */
export function planSchedule(plan: CommitPlan, keys: RedisKeys, name: string, s: ScheduleDocument | null): void {
  const key = keys.schedule(name);
  const p = keys.layout.partitionOf(name);
  if (s === null) {
    for (const f of ["spec", "owned", "max_fires", "state"]) plan.write("HDEL", key, f);
    plan.write("ZREM", keys.scheduleIndex(p), name);
    plan.write("ZREM", keys.scheduleDueIndex(p), name);
  } else {
    plan.write("HSET", key, "spec", s.specText).write("HSET", key, "owned", s.placementOwned ? "1" : "0");
    plan.write("HSET", key, "max_fires", s.maxFires.toString()).write("HSET", key, "state", encodeState(s.state));
    plan.write("ZADD", keys.scheduleIndex(p), "0", name);
    const due = dueIndexKey(s);
    if (due === undefined) plan.write("ZREM", keys.scheduleDueIndex(p), name);
    else plan.write("ZADD", keys.scheduleDueIndex(p), due.toString(), name);
  }
  plan.write("HINCRBY", key, "ver", "1");
}
