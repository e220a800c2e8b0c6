import { connectedPrimaries, type RedisClient } from "./redis-client.js";
import type { RedisKeys } from "./redis-keys.js";
import { STORE_KINDS, type KindSize, type StoreKind } from "./store-kinds.js";

/** Escapes Redis glob characters so that `text` matches only itself in SCAN MATCH. */
export function globLiteral(text: string): string {
  return text.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}

/** Keys per SCAN step; their MEMORY USAGE (and XLEN for streams) go out together, auto-pipelined. */
const SCAN_COUNT = 500;

/**
 * Measures a Redis store: SCAN over the keys under the store's prefix on
 * every primary (a cluster spreads them over its primaries; never blocking a
 * server: one step of {@link SCAN_COUNT} keys at a time), each
 * classified by {@link RedisKeys.kindOf}, with `MEMORY USAGE`: exact
 * (`SAMPLES 0`) for a record key (one snapshot, lease, schedule or fire: a
 * few fields), the default sampling for streams and indexes (an estimate,
 * but never a walk of a million entries)
 * and `XLEN` for event streams. Cost: O(keys of the store) commands,
 * pipelined; run it periodically, not per scrape.
 *
 * @throws the Redis error when a command fails.
 */
export async function measureRedis(redis: RedisClient, keys: RedisKeys): Promise<KindSize[]> {
  const records = new Map<StoreKind, number>(STORE_KINDS.map((k) => [k, 0]));
  const bytes = new Map<KindSize["kind"], number>();
  for (const node of await connectedPrimaries(redis)) {
    let cursor = "0";
    do {
      const [next, batch] = await node.scan(cursor, "MATCH", `${globLiteral(keys.base)}*`, "COUNT", SCAN_COUNT);
      cursor = next;
      await Promise.all(
        batch.map(async (key) => {
          const { kind, counts } = keys.kindOf(key);
          const [used, n] = await Promise.all([
            // A record's hash is measured whole (SAMPLES 0): the default samples
            // 5 fields, and which 5 depends on the server's hash seed, so a
            // 40 KB payload in a 6-field snapshot hash was missed at random.
            (counts === "one" ? node.call("MEMORY", "USAGE", key, "SAMPLES", "0") : node.call("MEMORY", "USAGE", key)) as Promise<number | null>,
            counts === "stream" ? node.xlen(key) : Promise.resolve(counts === "one" ? 1 : 0),
          ]);
          bytes.set(kind, (bytes.get(kind) ?? 0) + (used ?? 0));
          if (kind !== "other") records.set(kind, records.get(kind)! + n);
        }),
      );
    } while (cursor !== "0");
  }
  return [...STORE_KINDS.map((kind) => ({ kind, records: records.get(kind)!, bytes: bytes.get(kind) ?? 0 })), { kind: "other" as const, bytes: bytes.get("other") ?? 0 }];
}
