import type { RedisOperation } from "../storage/redis-operation.js";
import { redisScript, type OpRecord } from "../storage/redis-script.js";

/** Arguments each write op takes after its key, by op name. */
const OP_ARITY = { HSET: 2, HDEL: 1, HINCRBY: 2, ZADD: 2, ZREM: 1, SADD: 1, SREM: 1, SET: 1 } as const;

/** A Redis write command the commit script may run. */
export type CommitOp = keyof typeof OP_ARITY;

/**
 * Compare-and-set commit for schedule records: applies a list of writes only
 * if every guarded hash still has the version the caller read, so a rule
 * computed in TypeScript from that read lands atomically or not at all. A
 * write script: also takes the operation record (redis-script.ts
 * `OP_RECORD_LUA`), which makes a retried commit of the same operation
 * return the reply recorded by the attempt that committed.
 *
 * KEYS[1..n]     the guarded hashes (schedule and fire records); each has a
 *                `ver` field, absent meaning "0".
 * KEYS[n+1..n+m] keys that must not exist (a fence, redis-fire.ts).
 * KEYS[n+m+1..]  every other key the writes touch (indexes).
 * ARGV[1]        n, the number of guarded hashes; ARGV[2] m, the number of
 *                keys that must not exist.
 * ARGV[3..n+2]   the `ver` each guarded hash must still have.
 * ARGV[n+3]      the rule's reply to record when the writes are applied.
 * ARGV[n+4..]    the writes, each `op, keyIndex, args...` where op is one of
 *                HSET (field, value), HDEL (field), HINCRBY (field, by),
 *                ZADD (score, member), ZREM (member), SADD (member), SREM
 *                (member), SET (value) and keyIndex points into KEYS.
 *
 * Returns ARGV[n+3] when the writes were applied (recorded), 0 when a
 * version differed, -1 when a key that must not exist does (nothing written,
 * not recorded; the caller re-reads and retries, or gives up). The op list is
 * checked whole before anything is written, so a malformed list fails
 * without effect.
 */
const COMMIT = redisScript({
  name: "mecatlScheduleCommit",
  lua: `
local arity = { HSET = 2, HDEL = 1, HINCRBY = 2, ZADD = 2, ZREM = 1, SADD = 1, SREM = 1, SET = 1 }
local n = tonumber(ARGV[1])
local m = tonumber(ARGV[2])
local first = n + 4
local a = first
while a <= #ARGV do
  local k = arity[ARGV[a]]
  if k == nil or KEYS[tonumber(ARGV[a + 1])] == nil or a + 1 + k > #ARGV then
    return redis.error_reply('mecatlScheduleCommit: malformed op at ARGV[' .. a .. ']')
  end
  a = a + 2 + k
end
for i = 1, n do
  if (redis.call('HGET', KEYS[i], 'ver') or '0') ~= ARGV[2 + i] then return 0 end
end
for i = n + 1, n + m do
  if redis.call('EXISTS', KEYS[i]) == 1 then return -1 end
end
a = first
while a <= #ARGV do
  local op = ARGV[a]
  local k = arity[op]
  redis.call(op, KEYS[tonumber(ARGV[a + 1])], unpack(ARGV, a + 2, a + 1 + k))
  a = a + 2 + k
end
return op_done(ARGV[n + 3])
`,
});

/**
 * Builds one call of the commit script: the guarded hashes with the versions
 * read, then the writes. Keys are numbered in the order first used.
 */
export class CommitPlan {
  private readonly guards: Array<{ key: string; ver: string }> = [];
  private readonly absents: string[] = [];
  private readonly others: string[] = [];
  private readonly ops: string[] = [];

  /** Requires `key`'s `ver` field to still be `ver` ("0" for absent) at commit time. Call before any {@link write}. */
  guard(key: string, ver: string): this {
    if (this.ops.length > 0) throw new Error("CommitPlan: guards must come before writes");
    this.guards.push({ key, ver });
    return this;
  }

  /** Requires `key` not to exist at commit time (a fence another process may have set). Call before any {@link write}. */
  absent(key: string): this {
    if (this.ops.length > 0) throw new Error("CommitPlan: guards must come before writes");
    this.absents.push(key);
    return this;
  }

  private index(key: string): number {
    const g = this.guards.findIndex((x) => x.key === key);
    if (g >= 0) return g + 1;
    const a = this.absents.indexOf(key);
    if (a >= 0) return this.guards.length + a + 1;
    let o = this.others.indexOf(key);
    if (o < 0) o = this.others.push(key) - 1;
    return this.guards.length + this.absents.length + o + 1;
  }

  /** Adds one write; `args` are the op's arguments after the key (see {@link CommitOp}). */
  write(op: CommitOp, key: string, ...args: string[]): this {
    if (args.length !== OP_ARITY[op]) throw new Error(`CommitPlan: ${op} takes ${OP_ARITY[op]} arguments`);
    this.ops.push(op, String(this.index(key)), ...args);
    return this;
  }

  /** True when the plan writes nothing. */
  get empty(): boolean {
    return this.ops.length === 0;
  }

  /**
   * Runs the script as one request of `op`, with `record` as its operation
   * record.
   *
   * @param reply the rule's reply, encoded, to record with the writes.
   * @returns the recorded reply when committed (by this attempt or, for a
   *   retried operation, by an earlier one whose answer was lost), `stale`
   *   when a guarded version had changed, `fenced` when a key required
   *   absent exists.
   * @throws StoreFailure when Redis failed past `--store-timeout` (see
   *   storage/redis-operation.ts), or the Redis error of a malformed plan.
   */
  async commit(op: RedisOperation, record: OpRecord, reply: string): Promise<{ committed: string } | "stale" | "fenced"> {
    const keys = [...this.guards.map((g) => g.key), ...this.absents, ...this.others];
    const argv = [String(this.guards.length), String(this.absents.length), ...this.guards.map((g) => g.ver), reply, ...this.ops];
    const r = await op.script(COMMIT, keys, argv, record);
    if (typeof r === "string") return { committed: r };
    return r === -1 ? "fenced" : "stale";
  }
}
