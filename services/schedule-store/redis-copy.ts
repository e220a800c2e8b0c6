import { fireIndexMember, type RedisKeys } from "../storage/redis-keys.js";
import type { RedisOperations } from "../storage/redis-operation.js";
import { redisScript } from "../storage/redis-script.js";
import { readEach, type KindStore } from "../storage/copy/kind-store.js";
import { scanIds } from "../storage/copy/redis-scan.js";
import { copiedDueKey, type FireCopy, type ScheduleCopy } from "./copy-format.js";
import { parseFire } from "./schedule.js";

/**
 * Stores one schedule as given, with its List and Due index entries, for
 * `mecatl-drivers copy`; bumps its commit version (redis.ts).
 * KEYS[1] schedule hash, KEYS[2] its partition of the List index (sorted
 * set, every score 0), KEYS[3] its partition of the Due index.
 * ARGV[1] name, ARGV[2] spec, ARGV[3] owned (`1`/`0`), ARGV[4] max_fires,
 * ARGV[5] state, ARGV[6] Due score (milliseconds), or empty when it can
 * never be due.
 * Returns 1 (recorded).
 */
const PUT_SCHEDULE = redisScript({
  name: "mecatlSchedulePut",
  lua: `
redis.call('HSET', KEYS[1], 'spec', ARGV[2], 'owned', ARGV[3], 'max_fires', ARGV[4], 'state', ARGV[5])
redis.call('HINCRBY', KEYS[1], 'ver', 1)
redis.call('ZADD', KEYS[2], 0, ARGV[1])
if ARGV[6] == '' then redis.call('ZREM', KEYS[3], ARGV[1]) else redis.call('ZADD', KEYS[3], ARGV[6], ARGV[1]) end
return op_done(1)
`,
});

/**
 * Stores one fire record as given, with its ListFires index entry, for
 * `mecatl-drivers copy`; bumps its commit version.
 * KEYS[1] fire record hash, KEYS[2] its partition of the ListFires index
 * (sorted set, every score 0).
 * ARGV[1] index member (`RedisKeys` fireIndexMember), ARGV[2] record text.
 * Returns 1 (recorded).
 */
const PUT_FIRE = redisScript({
  name: "mecatlScheduleFirePut",
  lua: `
redis.call('HSET', KEYS[1], 'payload', ARGV[2])
redis.call('HINCRBY', KEYS[1], 'ver', 1)
redis.call('ZADD', KEYS[2], 0, ARGV[1])
return op_done(1)
`,
});

/**
 * Schedules and fire records of a Redis store, as `mecatl-drivers copy`
 * reads and writes them (issue 14; services/storage/copy/kind-store.ts):
 * schedule ids from the List index (a deleted schedule keeps only its
 * version and is skipped), fire ids by SCAN of the fire hashes (a fire
 * outlives its schedule's index entry).
 */
export class RedisScheduleCopy {
  /** @param ops the store's bounded, retried Redis operations (its connection and timeout). */
  constructor(
    private readonly ops: RedisOperations,
    private readonly keys: RedisKeys,
  ) {}

  private async readSchedule(name: string): Promise<ScheduleCopy | undefined> {
    const [spec, owned, maxFires, state] = await this.ops.read((r) => r.hmget(this.keys.schedule(name), "spec", "owned", "max_fires", "state"));
    if (spec === null || state === null) return undefined;
    return { name, spec, placementOwned: owned === "1", maxFires: maxFires ?? "0", state };
  }

  private async readFire(fireId: string): Promise<FireCopy | undefined> {
    const payload = await this.ops.read((r) => r.hget(this.keys.scheduleFire(fireId), "payload"));
    return payload === null ? undefined : { fireId, scheduleName: parseFire(payload).scheduleName, payload };
  }

  /** Schedules. */
  readonly schedules: KindStore<ScheduleCopy> = {
    ids: async () => (await Promise.all(this.keys.layout.all().map((p) => this.ops.read((r) => r.zrange(this.keys.scheduleIndex(p), "0", "-1"))))).flat(),
    read: (requests) => readEach(requests, (name) => this.readSchedule(name)),
    write: async (records) => {
      await Promise.all(
        records.map((s) => {
          const op = this.ops.begin();
          const p = this.keys.layout.partitionOf(s.name);
          const keys = [this.keys.schedule(s.name), this.keys.scheduleIndex(p), this.keys.scheduleDueIndex(p)];
          const args = [s.name, s.spec, s.placementOwned ? "1" : "0", s.maxFires, s.state, copiedDueKey(s)?.toString() ?? ""];
          return op.script(PUT_SCHEDULE, keys, args, op.record(this.keys.scheduleOp(s.name, op.id)));
        }),
      );
    },
  };

  /** Fire records. */
  readonly fires: KindStore<FireCopy> = {
    ids: () => scanIds(this.ops, this.keys.base, "fire", ":record"),
    read: (requests) => readEach(requests, (id) => this.readFire(id)),
    write: async (records) => {
      await Promise.all(
        records.map((f) => {
          const op = this.ops.begin();
          const keys = [this.keys.scheduleFire(f.fireId), this.keys.fireIndexOf(f.fireId)];
          return op.script(PUT_FIRE, keys, [fireIndexMember(f.scheduleName, f.fireId), f.payload], op.record(this.keys.fireOp(f.fireId, op.id, "copy")));
        }),
      );
    },
  };
}
