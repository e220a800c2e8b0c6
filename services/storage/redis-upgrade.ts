/**
 * The upgrade of a Redis store from key layout `v1:` (earlier builds: one
 * global index each for List, Due, ListSchedules and ListFires, records
 * hash-tagged by their own id) to layout `v2:` (redis-keys.ts: records and
 * index partitions under partition tags, issue 13), run once at start by
 * `serve` (redis-store.ts) before the server listens.
 *
 * Every `v1:` key is visited by SCAN (on every primary) and handled once:
 * a record's key is moved to its `v2:` name (DUMP, RESTORE unless the new
 * key exists, DEL), a global index is split into the partitions of its
 * members (ZADD, then DEL), operation records are dropped (they only serve
 * retries of calls made before the upgrade). Each step is idempotent and
 * leaves the data whole whenever it stops, so a crashed upgrade is simply
 * run again; the store is marked upgraded (`RedisKeys.config` field
 * `layout`) only after the last `v1:` key is gone. One process upgrades at a
 * time (a lock key with an expiry it keeps renewing); others wait for it.
 *
 * Servers of the earlier build must be stopped first: what they write
 * under `v1:` after their key was moved is not seen by this build.
 */
import { randomBytes } from "node:crypto";
import { connectedPrimaries } from "./redis-client.js";
import type { RedisKeys } from "./redis-keys.js";
import { fireIndexMember } from "./redis-keys.js";
import { globLiteral } from "./redis-measure.js";
import type { RedisOperations } from "./redis-operation.js";
import { StoreFailure } from "./store-failure.js";

/** Progress of an upgrade: a log message and its fields. */
export type UpgradeLog = (msg: string, fields: Record<string, unknown>) => void;

/** Keys per SCAN step. */
const SCAN_COUNT = 500;

/** Milliseconds the upgrade lock lives unless renewed; it is renewed every third of that. */
const LOCK_MS = 30_000;

/** Suffixes of a v1 session key and the v2 key builder each maps to. */
const SESSION_SUFFIXES: ReadonlyArray<[string, (k: RedisKeys, id: string) => string]> = [
  ["}:snapshot", (k, id) => k.snapshot(id)],
  ["}:payload", (k, id) => k.snapshotChunks(id)],
  ["}:lease", (k, id) => k.lease(id)],
  ["}:events:meta", (k, id) => k.eventLogMeta(id)],
  ["}:events", (k, id) => k.eventLog(id)],
];

/**
 * Finds one key of layout `v1:` under `prefix`, by SCAN until the first one
 * (every primary), or undefined when there is none.
 */
export async function findLegacyKey(ops: RedisOperations, prefix: string): Promise<string | undefined> {
  const match = `${globLiteral(`${prefix}v1:`)}*`;
  for (const node of await connectedPrimaries(ops.redis)) {
    let cursor = "0";
    do {
      const [next, found] = await ops.read(() => node.scan(cursor, "MATCH", match, "COUNT", SCAN_COUNT * 10));
      if (found.length > 0) return found[0];
      cursor = next;
    } while (cursor !== "0");
  }
  return undefined;
}

/** What to do with one v1 key. */
type Plan = { move: string } | { split: "sessions" | "names" | "due" } | { fires: string } | "drop" | "keep";

/** The plan for v1 key `rest` (the part after `<prefix>v1:`), whose Redis type is `type`. */
function planFor(keys: RedisKeys, rest: string, type: string): Plan {
  if (rest === "sessions") return { split: "sessions" };
  if (rest === "schedules:by-name" || rest === "schedules") return { split: "names" };
  if (rest === "schedules:due") return { split: "due" };
  if (rest === "copy-progress") return { move: keys.copyProgress() };
  if (rest === "session-meta:{m-config}") return "keep";
  // Operation records serve retries of calls made before the upgrade; a staged payload no Save published is garbage.
  if (/}:(op|stage):[0-9a-f]{16}$/.test(rest)) return "drop";
  if (rest.startsWith("session:{")) {
    for (const [suffix, to] of SESSION_SUFFIXES) if (rest.endsWith(suffix)) return { move: to(keys, rest.slice("session:{".length, rest.length - suffix.length)) };
  }
  const meta = /^session-meta:\{m(\d+)\}:(.*)$/s.exec(rest);
  if (meta !== null) return { move: keys.sessionMetaPartition(Number(meta[1])) + meta[2] };
  if (rest.startsWith("schedule-fire:{") && rest.endsWith("}")) return { move: keys.scheduleFire(rest.slice("schedule-fire:{".length, -1)) };
  if (rest.startsWith("schedule:{")) {
    if (type === "hash" && rest.endsWith("}")) return { move: keys.schedule(rest.slice("schedule:{".length, -1)) };
    for (const suffix of ["}:fire-ids", "}:fires"]) if (type !== "hash" && rest.endsWith(suffix)) return { fires: rest.slice("schedule:{".length, rest.length - suffix.length) };
  }
  return "keep";
}

/**
 * Upgrades the store of `keys` from layout `v1:` (see the module comment).
 * Returns when no `v1:` key of this store is left but the metadata
 * configuration (dropped by the caller once the store is marked upgraded),
 * whether this process did the work or waited for another.
 *
 * @throws StoreFailure when Redis fails past the operation timeout at a
 *   step, or another process's upgrade makes no progress for 10 minutes.
 */
export async function upgradeFromV1(ops: RedisOperations, keys: RedisKeys, log: UpgradeLog): Promise<void> {
  const lock = keys.upgradeLock();
  const token = randomBytes(8).toString("hex");
  const waitUntil = Date.now() + 600_000;
  while ((await ops.read((r) => r.set(lock, token, "PX", LOCK_MS, "NX"))) === null) {
    if ((await findLegacyKey(ops, keys.prefix)) === undefined) return;
    if (Date.now() > waitUntil) throw new StoreFailure("unreachable", "another process has been upgrading the Redis store's key layout for 10 minutes; stop it or delete the lock key " + lock);
    await new Promise((r) => setTimeout(r, 500));
  }
  const renew = setInterval(() => void ops.read((r) => r.set(lock, token, "PX", LOCK_MS, "XX")).catch(() => undefined), LOCK_MS / 3);
  renew.unref();
  try {
    log("upgrading the Redis key layout", { from: `${keys.prefix}v1:`, to: keys.base, partitions: keys.layout.partitions });
    const counts = { moved: 0, split: 0, dropped: 0, kept: 0 };
    const head = `${keys.prefix}v1:`;
    for (const node of await connectedPrimaries(ops.redis)) {
      let cursor = "0";
      do {
        const [next, found] = await ops.read(() => node.scan(cursor, "MATCH", `${globLiteral(head)}*`, "COUNT", SCAN_COUNT));
        cursor = next;
        for (const key of found) {
          const type = await ops.read((r) => r.type(key));
          if (type === "none") continue;
          const plan = planFor(keys, key.slice(head.length), type);
          if (plan === "keep") counts.kept++;
          else if (plan === "drop") (await ops.read((r) => r.del(key)), counts.dropped++);
          else if ("move" in plan) (await move(ops, key, plan.move), counts.moved++);
          else (await split(ops, keys, key, plan), counts.split++);
        }
        if (found.length > 0) log("upgrading the Redis key layout", { ...counts });
      } while (cursor !== "0");
    }
    log("upgraded the Redis key layout", { ...counts });
  } finally {
    clearInterval(renew);
    await ops.read((r) => r.eval("if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0", 1, lock, token)).catch(() => undefined);
  }
}

/** Moves `from` to `to` (possibly another slot or node): DUMP, RESTORE unless `to` exists (an earlier run moved it), DEL. */
async function move(ops: RedisOperations, from: string, to: string): Promise<void> {
  const dump = await ops.read((r) => r.dumpBuffer(from));
  if (dump !== null) {
    await ops.read((r) => r.restore(to, 0, dump)).catch((err: Error) => {
      if (!/BUSYKEY/.test(err.message)) throw err;
    });
  }
  await ops.read((r) => r.del(from));
}

/** Reads a v1 index a page at a time (ZSCAN or SSCAN), handing each page's members (with scores for a sorted set). */
async function eachMember(ops: RedisOperations, key: string, each: (members: Array<[string, string]>) => Promise<void>): Promise<void> {
  const type = await ops.read((r) => r.type(key));
  let cursor = "0";
  do {
    if (type === "zset") {
      const [next, flat] = await ops.read((r) => r.zscan(key, cursor, "COUNT", SCAN_COUNT));
      cursor = next;
      const page: Array<[string, string]> = [];
      for (let i = 0; i + 1 < flat.length; i += 2) page.push([flat[i]!, flat[i + 1]!]);
      await each(page);
    } else {
      const [next, members] = await ops.read((r) => r.sscan(key, cursor, "COUNT", SCAN_COUNT));
      cursor = next;
      await each(members.map((m) => [m, "0"]));
    }
  } while (cursor !== "0");
}

/** Splits a v1 global index into its v2 partitions, then deletes it. */
async function split(ops: RedisOperations, keys: RedisKeys, key: string, plan: { split: "sessions" | "names" | "due" } | { fires: string }): Promise<void> {
  await eachMember(ops, key, async (members) => {
    await Promise.all(
      members.map(([member, score]) => {
        if ("fires" in plan) return ops.read((r) => r.zadd(keys.fireIndexOf(member), 0, fireIndexMember(plan.fires, member)));
        const p = keys.layout.partitionOf(member);
        if (plan.split === "sessions") return ops.read((r) => r.zadd(keys.sessionIndex(p), score, member));
        if (plan.split === "names") return ops.read((r) => r.zadd(keys.scheduleIndex(p), 0, member));
        return ops.read((r) => r.zadd(keys.scheduleDueIndex(p), score, member));
      }),
    );
  });
  await ops.read((r) => r.del(key));
}
