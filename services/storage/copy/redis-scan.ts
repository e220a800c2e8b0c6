import type { RedisClient } from "../redis-client.js";
import { globLiteral } from "../redis-measure.js";
import type { RedisOperations } from "../redis-operation.js";

/** Keys per SCAN step. */
const SCAN_COUNT = 1000;

/**
 * Every key that starts with `prefix` and ends with `suffix`, by SCAN (one
 * step of {@link SCAN_COUNT} keys at a time, never blocking the server),
 * returned as the part between the two. Each step is a bounded, retried read
 * of `ops`. For `mecatl-drivers copy`, which lists the ids of kinds that
 * keep no index (leases, event logs, fire records); never on a hot path.
 *
 * @throws StoreFailure when Redis does not answer within the operation timeout.
 */
export async function scanIds(ops: RedisOperations, prefix: string, suffix: string): Promise<string[]> {
  const ids = new Set<string>();
  const match = `${globLiteral(prefix)}*${globLiteral(suffix)}`;
  let cursor = "0";
  do {
    const [next, keys] = await ops.read((r: RedisClient) => r.scan(cursor, "MATCH", match, "COUNT", SCAN_COUNT));
    cursor = next;
    // SCAN may return a key twice; a key shorter than prefix + suffix cannot be one of ours.
    for (const k of keys) if (k.length >= prefix.length + suffix.length) ids.add(k.slice(prefix.length, k.length - suffix.length));
  } while (cursor !== "0");
  return [...ids];
}

/**
 * Deletes every key that starts with `prefix` (SCAN, then UNLINK in steps),
 * for `mecatl-drivers copy --replace` on a Redis target.
 *
 * @throws StoreFailure when Redis does not answer within the operation timeout.
 */
export async function unlinkAll(ops: RedisOperations, prefix: string): Promise<void> {
  let cursor = "0";
  do {
    const [next, keys] = await ops.read((r: RedisClient) => r.scan(cursor, "MATCH", `${globLiteral(prefix)}*`, "COUNT", SCAN_COUNT));
    cursor = next;
    if (keys.length > 0) await ops.read((r: RedisClient) => r.unlink(...keys));
  } while (cursor !== "0");
}
