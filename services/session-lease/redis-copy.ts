import type { RedisKeys } from "../storage/redis-keys.js";
import type { RedisOperations } from "../storage/redis-operation.js";
import { redisScript } from "../storage/redis-script.js";
import { readEach, type CopyReadRequest, type KindStore } from "../storage/copy/kind-store.js";
import { scanIds } from "../storage/copy/redis-scan.js";
import type { LeaseCopy } from "./copy-format.js";

/**
 * Replaces one lease hash with the record given, for `mecatl-drivers copy`.
 * KEYS[1] the session's lease hash.
 * ARGV[1] high_water, then, when the lease is held, ARGV[2] owner, ARGV[3]
 * token, ARGV[4] expiry_us (decimal strings, as lease-lua.ts keeps them).
 * Returns 1 (recorded).
 */
const PUT_LEASE = redisScript({
  name: "mecatlSessionLeasePut",
  lua: `
redis.call('DEL', KEYS[1])
if ARGV[2] then
  redis.call('HSET', KEYS[1], 'high_water', ARGV[1], 'owner', ARGV[2], 'token', ARGV[3], 'expiry_us', ARGV[4])
else
  redis.call('HSET', KEYS[1], 'high_water', ARGV[1])
end
return op_done(1)
`,
});

/**
 * Lease records of a Redis store, as `mecatl-drivers copy` reads and writes
 * them (issue 14; services/storage/copy/kind-store.ts): ids by SCAN of the
 * lease hashes, the hold and high-water mark as the lease script keeps them.
 */
export class RedisLeaseCopy implements KindStore<LeaseCopy> {
  /** @param ops the store's bounded, retried Redis operations (its connection and timeout). */
  constructor(
    private readonly ops: RedisOperations,
    private readonly keys: RedisKeys,
  ) {}

  ids(): Promise<string[]> {
    return scanIds(this.ops, this.keys.base, "session", ":lease");
  }

  read(requests: readonly CopyReadRequest[]) {
    return readEach(requests, async (id): Promise<LeaseCopy | undefined> => {
      const [owner, token, expiryUs, highWater] = await this.ops.read((r) => r.hmget(this.keys.lease(id), "owner", "token", "expiry_us", "high_water"));
      if (highWater === null) return undefined;
      return { sessionId: id, hold: owner === null ? undefined : { owner, token: token!, expiryUs: expiryUs! }, highWater };
    });
  }

  async write(records: readonly LeaseCopy[]): Promise<void> {
    await Promise.all(
      records.map((l) => {
        const op = this.ops.begin();
        const hold = l.hold === undefined ? [] : [l.hold.owner, l.hold.token, l.hold.expiryUs];
        return op.script(PUT_LEASE, [this.keys.lease(l.sessionId)], [l.highWater, ...hold], op.record(this.keys.sessionOp(l.sessionId, op.id)));
      }),
    );
  }
}
