/**
 * The advice of the durability check a copy target (and `serve`) runs on
 * every Redis node (services/storage/redis-connection.ts verifyDurability):
 * "allow CONFIG GET or relax durability" only when the server refused
 * CONFIG GET (NOPERM); a node that cannot be asked (it just died: the
 * connection is closed, a failover may be under way) is reported as
 * unreachable, with "retry", never with advice to relax durability.
 */
import { afterAll, expect, test } from "vitest";
import { Redis } from "ioredis";
import { spawnRedis, type SpawnedRedis } from "../helpers/redis-server.js";
import { verifyDurability } from "../../services/storage/redis-connection.js";

let redis: SpawnedRedis | undefined;
afterAll(async () => redis?.stop());

test("CONFIG GET refused: allow it or relax; node unreachable: retry, no advice to relax", async () => {
  redis = await spawnRedis();
  const admin = redis.client();
  await admin.acl("SETUSER", "noconfig", "on", ">pw", "~*", "+@all", "-config");
  admin.disconnect();

  const limited = new Redis({ port: redis.port, host: "127.0.0.1", username: "noconfig", password: "pw", lazyConnect: true, maxRetriesPerRequest: 0 });
  await limited.connect();
  const refused = await verifyDurability(limited).then(() => undefined, (err: Error) => err.message);
  expect(refused).toMatch(/CONFIG GET refused: NOPERM/);
  expect(refused).toContain("allow CONFIG GET for this user or pass --redis-durability=relaxed");
  limited.disconnect();

  // A node connection whose server died, as a cluster client still lists a failed primary before the failover.
  const node = new Redis({ port: redis.port, host: "127.0.0.1", lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => null });
  node.on("error", () => undefined);
  await node.connect();
  await redis.kill();
  await new Promise<void>((resolve) => (node.status === "end" ? resolve() : node.once("end", () => resolve())));
  const down = await verifyDurability(node, `node 127.0.0.1:${redis.port}`).then(() => undefined, (err: Error) => err.message);
  expect(down).toMatch(new RegExp(`^cannot verify Redis durability of node 127.0.0.1:${redis.port}: the node is unreachable \\(.+\\); a failover may be in progress; retry`));
  expect(down).not.toContain("relaxed");
  expect(down).not.toContain("allow CONFIG GET");
  const single = await verifyDurability(node).then(() => undefined, (err: Error) => err.message);
  expect(single).toMatch(/the server is unreachable .*retry/);
  expect(single).not.toContain("relaxed");
});
