/**
 * A Redis that no longer holds the driver's Lua scripts: after a restart
 * without them, a failover to a replica, or SCRIPT FLUSH. Scripts are sent
 * by SHA-1 (EVALSHA); Redis answers NOSCRIPT, which means nothing ran, and
 * the driver sends the script's source (EVAL) once. Every call must still
 * answer OK with its write applied exactly once, on the plain path and on
 * the `--redis-wait-replicas` path (writes pipelined with WAIT), on a
 * single Redis and on a Redis Cluster (services/storage/redis-script.ts).
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { Client } from "@connectrpc/connect";
import type { Redis } from "ioredis";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { SessionLeaseService } from "../../gen/mecatl/driver/v1/session_lease_pb.js";
import { EventLogService } from "../../gen/mecatl/driver/v1/event_log_pb.js";
import { fileCluster } from "../helpers/backends.js";
import { spawnRedis, type SpawnedRedis } from "../helpers/redis-server.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { grpcClient } from "../helpers/clients.js";
import { waitFor } from "../helpers/wait.js";

const snap = (text: string) => ({ format: "sessnap-json/1", payload: new TextEncoder().encode(text) });
const event = (n: number) => ({ format: "eventlog-json/1", payload: new TextEncoder().encode(JSON.stringify({ n })) });

/** EVAL calls a node has answered so far (INFO commandstats). */
async function evalCalls(node: Redis): Promise<number> {
  return Number(/cmdstat_eval:calls=(\d+)/.exec(await node.info("commandstats"))?.[1] ?? 0);
}

/** A store whose nodes can be told to forget their scripts. */
interface Target {
  store: string;
  args: string[];
  /** A fresh client of each primary (caller disconnects them). */
  primaries(): Promise<Redis[]>;
}

/** Saves, renews, appends; has every primary forget its scripts; does it all again and checks each write happened once. */
function scriptCacheSuite(target: () => Target) {
  let server: ServerProcess;
  let store: Client<typeof SessionStoreService>;
  let leases: Client<typeof SessionLeaseService>;
  let log: Client<typeof EventLogService>;
  beforeAll(async () => {
    const t = target();
    server = await startServer(["session-store", "session-lease", "event-log", "--store", t.store, ...t.args]);
    store = grpcClient(SessionStoreService, server.address);
    leases = grpcClient(SessionLeaseService, server.address);
    log = grpcClient(EventLogService, server.address);
  });
  afterAll(async () => {
    await server?.stop();
  });

  test("every write after SCRIPT FLUSH answers OK and is applied once, its script sent again with EVAL", async () => {
    const ids = ["cache-a", "cache-b", "cache-c", "cache-d"];
    for (const id of ids) await store.save({ sessionId: id, snapshot: snap(`${id} 1`) });
    let lease = (await leases.acquire({ sessionId: "cache-lease", owner: "o" })).lease!;
    for (const id of ids) await log.append({ sessionId: id, event: event(1) });

    const nodes = await target().primaries();
    try {
      await Promise.all(nodes.map((n) => n.script("FLUSH")));
      const before = (await Promise.all(nodes.map(evalCalls))).reduce((a, b) => a + b, 0);
      // Several at once, so that some share a pipeline (or a WAIT group) and several NOSCRIPT answers come back together.
      await Promise.all(ids.map((id) => store.save({ sessionId: id, snapshot: snap(`${id} 2`) })));
      await Promise.all(ids.map((id) => log.append({ sessionId: id, event: event(2) })));
      lease = (await leases.renew({ lease })).lease!;
      await expect(store.create({ sessionId: "cache-new", snapshot: snap("new") })).resolves.toBeDefined();
      const after = (await Promise.all(nodes.map(evalCalls))).reduce((a, b) => a + b, 0);
      expect(after, "the scripts were sent again by their source").toBeGreaterThan(before);
    } finally {
      for (const n of nodes) n.disconnect();
    }
    for (const id of ids) {
      expect(new TextDecoder().decode((await store.load({ sessionId: id })).snapshot?.payload)).toBe(`${id} 2`);
      const events: unknown[] = [];
      for await (const r of log.read({ sessionId: id })) events.push(JSON.parse(new TextDecoder().decode(r.event?.payload)));
      expect(events, "each append applied exactly once").toEqual([{ n: 1 }, { n: 2 }]);
    }
    expect(lease.token).toBeGreaterThan(0n);
    await expect(leases.release({ lease })).resolves.toBeDefined();
    expect(new TextDecoder().decode((await store.load({ sessionId: "cache-new" })).snapshot?.payload)).toBe("new");
  });
}

describe("scripts forgotten by a single Redis", () => {
  let redis: SpawnedRedis;
  beforeAll(async () => {
    redis = await spawnRedis();
  });
  afterAll(async () => {
    await redis?.stop();
  });
  scriptCacheSuite(() => ({ store: redis.url, args: [], primaries: async () => [redis.client()] }));
});

describe("scripts forgotten by a single Redis, with --redis-wait-replicas 1", () => {
  let primary: SpawnedRedis;
  let replica: SpawnedRedis;
  beforeAll(async () => {
    [primary, replica] = await Promise.all([spawnRedis(), spawnRedis()]);
    const r = replica.client();
    await r.replicaof("127.0.0.1", primary.port);
    await waitFor(async () => (await r.info("replication")).includes("master_link_status:up"), 15_000, "the replica to sync");
    r.disconnect();
  });
  afterAll(async () => {
    await Promise.all([primary?.stop(), replica?.stop()]);
  });
  scriptCacheSuite(() => ({ store: primary.url, args: ["--redis-wait-replicas", "1"], primaries: async () => [primary.client()] }));
});

describe("scripts forgotten by every primary of a Redis Cluster", () => {
  let url = "";
  let primaries: () => Promise<Redis[]> = async () => [];
  beforeAll(async () => {
    const cluster = await fileCluster();
    await cluster.flush();
    url = cluster.url;
    primaries = async () => (await cluster.primaries()).map((n) => n.client());
  });
  scriptCacheSuite(() => ({ store: url, args: [], primaries: () => primaries() }));
});
