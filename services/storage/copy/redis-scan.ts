import { globLiteral } from "../redis-measure.js";
import type { Redis } from "ioredis";
import { connectedPrimaries } from "../redis-client.js";
import type { RedisOperations } from "../redis-operation.js";
import type { RedisKeys } from "../redis-keys.js";

/** Keys per SCAN step. */
const SCAN_COUNT = 1000;

/**
 * Every key matching the glob `match` on every primary (a cluster spreads a
 * store over its primaries), by SCAN, one step of {@link SCAN_COUNT} keys
 * at a time (never blocking a server), each step a bounded, retried read of
 * `ops`, handed to `each` a step at a time. A key may be handed over twice
 * (SCAN's guarantee).
 *
 * @throws StoreFailure when Redis does not answer within the operation timeout.
 */
async function scanKeys(ops: RedisOperations, match: string, each: (node: Redis, keys: string[]) => Promise<void>): Promise<void> {
  for (const node of await connectedPrimaries(ops.redis)) {
    let cursor = "0";
    do {
      const [next, keys] = await ops.read(() => node.scan(cursor, "MATCH", match, "COUNT", SCAN_COUNT));
      cursor = next;
      if (keys.length > 0) await each(node, keys);
    } while (cursor !== "0");
  }
}

/**
 * The ids of every record of one kind of a key layout `v2:` store:
 * every key `<base><kind>:{<tag>}:<id><suffix>`, returned as `<id>`. For
 * `mecatl-drivers copy`, which lists the ids of kinds that keep no index
 * (leases, event logs, fire records); never on a hot path.
 *
 * @throws StoreFailure when Redis does not answer within the operation timeout.
 */
export async function scanIds(ops: RedisOperations, base: string, kind: string, suffix: string): Promise<string[]> {
  const ids = new Set<string>();
  const head = `${base}${kind}:{`;
  await scanKeys(ops, `${globLiteral(head)}*}:*${globLiteral(suffix)}`, async (_node, keys) => {
    for (const k of keys) {
      if (!k.startsWith(head) || !k.endsWith(suffix)) continue;
      const close = k.indexOf("}:", head.length);
      if (close >= 0 && close + 2 <= k.length - suffix.length) ids.add(k.slice(close + 2, k.length - suffix.length));
    }
  });
  return [...ids];
}

/**
 * Deletes every key of the store `keys` names: each key under its base
 * (`<prefix>v2:`) that the layout defines for it ({@link RedisKeys.owns}),
 * by SCAN, then UNLINK of each key, on every primary; for `mecatl-drivers
 * copy --replace` on a Redis target. Any other key, even one starting with
 * the same text, is left alone, and so is the store's configuration
 * (`store:{config}`: its partition count and id, by which `keys` places
 * the records the copy then writes).
 *
 * @throws StoreFailure when Redis does not answer within the operation timeout.
 */
export async function unlinkStore(ops: RedisOperations, keys: RedisKeys): Promise<void> {
  const config = keys.config();
  await scanKeys(ops, `${globLiteral(keys.base)}*`, async (node, found) => {
    const owned = found.filter((k) => keys.owns(k) && k !== config);
    // One key per command: keys of one node may still lie on different slots.
    await ops.read(() => Promise.all(owned.map((k) => node.unlink(k))));
  });
}
