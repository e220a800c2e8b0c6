import { randomBytes } from "node:crypto";
import type { RedisClient } from "./redis-client.js";
import { StartupError } from "./redis-connection.js";
import { KEY_LAYOUT_VERSION, RedisKeys } from "./redis-keys.js";
import { DEFAULT_PARTITIONS, MAX_PARTITIONS } from "./redis-layout.js";
import { RedisOperations } from "./redis-operation.js";
import { redisScript } from "./redis-script.js";
import { findLegacyKey, upgradeFromV1, type UpgradeLog } from "./redis-upgrade.js";

/**
 * Records the store's configuration unless already recorded, and reads it
 * back. A write script (operation record).
 * KEYS[1] the configuration hash (`RedisKeys.config`).
 * ARGV[1] partition count and ARGV[2] store id for a new store, ARGV[3]
 * metadata layout version whose backfill has finished, or empty, ARGV[4]
 * key layout version now complete, or empty.
 * Returns {partitions, store_id, layout or false, migrated or false} (recorded).
 */
const CONFIGURE_STORE = redisScript({
  name: "mecatlStoreConfigure",
  lua: `
redis.call('HSETNX', KEYS[1], 'partitions', ARGV[1])
redis.call('HSETNX', KEYS[1], 'store_id', ARGV[2])
if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], 'migrated', ARGV[3]) end
if ARGV[4] ~= '' then redis.call('HSET', KEYS[1], 'layout', ARGV[4]) end
return op_done(redis.call('HMGET', KEYS[1], 'partitions', 'store_id', 'layout', 'migrated'))
`,
});

/** Fields {@link configureStore} sets: the partition count and store id only when the store has none yet. */
export interface StoreConfigUpdate {
  partitions?: string;
  storeId?: string;
  /** Metadata layout version whose backfill has finished. */
  migrated?: string;
  /** Key layout version now complete. */
  layout?: string;
}

/**
 * Records the store's configuration (see {@link CONFIGURE_STORE}) and reads
 * it back as [partitions, store_id, layout, migrated]: a new store gets
 * `update.partitions` (default {@link DEFAULT_PARTITIONS}) and
 * `update.storeId` (default random).
 *
 * @throws StoreFailure when Redis fails past the operation timeout.
 */
export async function configureStore(ops: RedisOperations, keys: RedisKeys, update: StoreConfigUpdate): Promise<[string, string, string | null, string | null]> {
  const op = ops.begin();
  const args = [update.partitions ?? String(DEFAULT_PARTITIONS), update.storeId ?? randomBytes(8).toString("hex"), update.migrated ?? "", update.layout ?? ""];
  return (await op.script(CONFIGURE_STORE, [keys.config()], args, op.record(keys.configOp(op.id)))) as [string, string, string | null, string | null];
}

/** What the store's configuration says, as read. */
interface Recorded {
  partitions: number;
  layout: string | null;
}

async function readConfig(ops: RedisOperations, keys: RedisKeys): Promise<Recorded | undefined> {
  const [partitions, layout] = await ops.read((r) => r.hmget(keys.config(), "partitions", "layout"));
  return partitions === null ? undefined : { partitions: checkedPartitions(partitions, keys), layout };
}

function checkedPartitions(text: string, keys: RedisKeys): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1 || n > MAX_PARTITIONS) throw new StartupError(`the Redis store ${keys.base} records ${JSON.stringify(text)} partitions; expected 1 to ${MAX_PARTITIONS}: is ${keys.config()} another program's key?`);
  return n;
}

/** Options of {@link openRedisStore}. */
export interface OpenStoreOptions {
  /** `--redis-key-prefix`. */
  prefix: string;
  /** `--store-timeout` in milliseconds (each step of the upgrade is bounded by it). */
  storeTimeoutMs: number;
  /**
   * `serve`: create the configuration of a new store, and upgrade a store
   * written by an earlier build (layout `v1:`); `read`: write nothing (a
   * copy source, `stats`).
   */
  mode: "serve" | "read";
  /** Progress of an upgrade, for the server's log. */
  log?: UpgradeLog;
}

/**
 * Opens the key layout of a Redis store (issue 13): reads its
 * configuration (`RedisKeys.config`) and returns the keys of its layout with
 * the partition count it records.
 *
 * In `serve` mode a new store is configured with {@link DEFAULT_PARTITIONS}
 * partitions and a fresh store id; a store an earlier build wrote (keys
 * under `<prefix>v1:`, one global List, Due, ListSchedules and ListFires
 * index each) is upgraded first (redis-upgrade.ts), keeping its metadata
 * partition count and store id, and only then marked complete (`layout`).
 * Several processes may start at once: one upgrades, the others wait for it.
 *
 * @throws StartupError when the store records an impossible partition count,
 *   or, in `read` mode, was written by an earlier build and not upgraded yet.
 * @throws StoreFailure when Redis fails past `storeTimeoutMs` at a step.
 */
export async function openRedisStore(redis: RedisClient, options: OpenStoreOptions): Promise<RedisKeys> {
  const probe = new RedisKeys(options.prefix);
  // The configuration and the upgrade are written again by a start after a failover lost them: no WAIT.
  const ops = new RedisOperations(redis, options.storeTimeoutMs, false);
  const recorded = await readConfig(ops, probe);
  if (recorded?.layout === String(KEY_LAYOUT_VERSION)) return new RedisKeys(options.prefix, recorded.partitions);
  const legacy = await findLegacyKey(ops, options.prefix);
  if (options.mode === "read") {
    if (legacy !== undefined) {
      throw new StartupError(`the Redis store under ${JSON.stringify(options.prefix)} was written by an earlier build (keys ${options.prefix}v1:...); start "mecatl-drivers serve" of this build on it once (it upgrades the key layout), then copy`);
    }
    return new RedisKeys(options.prefix, recorded?.partitions ?? DEFAULT_PARTITIONS);
  }
  const old = legacy === undefined ? undefined : await ops.read((r) => r.hmget(`${options.prefix}v1:session-meta:{m-config}`, "partitions", "store_id", "migrated"));
  const configure = (layout: string) => configureStore(ops, probe, { partitions: old?.[0] ?? undefined, storeId: old?.[1] ?? undefined, migrated: old?.[2] ?? undefined, layout });
  const [partitions] = await configure(legacy === undefined ? String(KEY_LAYOUT_VERSION) : "");
  const keys = new RedisKeys(options.prefix, checkedPartitions(partitions, probe));
  if (legacy !== undefined) {
    await upgradeFromV1(ops, keys, options.log ?? (() => undefined));
    await configure(String(KEY_LAYOUT_VERSION));
    await ops.read((r) => r.del(`${options.prefix}v1:session-meta:{m-config}`));
  }
  return keys;
}
