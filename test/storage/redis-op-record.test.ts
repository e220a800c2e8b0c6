import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { spawnRedis, type SpawnedRedis } from "../helpers/redis-server.js";
import { writeClients, WRITE_KINDS } from "../helpers/durable-writes.js";

/**
 * The operation record every Redis write leaves behind (README "Exactly-once
 * writes") expires after 10 × `--store-timeout`, and at least 60 s: long past
 * every retry of its operation, yet not forever. The figures are the README's,
 * written out here rather than computed by the code under test.
 */
describe("Redis operation records expire", () => {
  let redis: SpawnedRedis;
  const servers: ServerProcess[] = [];
  beforeAll(async () => {
    redis = await spawnRedis();
  });
  afterAll(async () => {
    for (const s of servers) await s.stop();
    await redis?.stop();
  });

  test.each([
    ["--store-timeout 10s: 10 × the timeout", "10s", "ot10-", 100_000],
    ["--store-timeout 2s: the 60 s minimum", "2s", "ot2-", 60_000],
  ])("%s", async (_label, timeout, prefix, ttlMs) => {
    const server = await startServer(["--store", redis.url, "--store-timeout", timeout]);
    servers.push(server);
    const clients = writeClients(server.address);
    for (const kind of WRITE_KINDS) await kind.write(clients, `${prefix}${kind.name.replaceAll(" ", "-")}`);
    const admin = redis.client();
    try {
      const records = (await admin.keys(`*${prefix}*:op:*`)).sort();
      // One record per write RPC at least (a Save over 1 MiB records its publishing step).
      expect(records.length).toBeGreaterThanOrEqual(WRITE_KINDS.length);
      const ttls = await Promise.all(records.map((k) => admin.pttl(k)));
      // Set a moment ago with PX ttlMs: within a few seconds below it, and never without expiry (-1).
      expect(records.map((k, i) => `${k}: ${ttls[i]}`).filter((_, i) => !(ttls[i]! > ttlMs - 5000 && ttls[i]! <= ttlMs))).toEqual([]);
    } finally {
      admin.disconnect();
    }
  });
});
