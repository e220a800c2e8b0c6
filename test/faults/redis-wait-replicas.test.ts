/**
 * `--redis-wait-replicas N` (issue 13, deliverable 3): a write is answered
 * OK only once N replicas acknowledged it (WAIT on its primary); when they
 * do not within --store-timeout the answer is UNAVAILABLE saying the outcome
 * is unknown (the primary has it), never OK; reads never queue behind a
 * blocked WAIT. On a single Redis with and without a replica, and on a
 * Redis Cluster whose replica of one primary is gone.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Code } from "@connectrpc/connect";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { SessionLeaseService } from "../../gen/mecatl/driver/v1/session_lease_pb.js";
import { fileCluster } from "../helpers/backends.js";
import { sessionIdOn, type SpawnedCluster } from "../helpers/redis-cluster.js";
import { spawnRedis, type SpawnedRedis } from "../helpers/redis-server.js";
import { runServeExpectingFailure, startServer, type ServerProcess } from "../helpers/server.js";
import { grpcClient } from "../helpers/clients.js";
import { expectCode } from "../helpers/errors.js";
import { waitFor } from "../helpers/wait.js";

const snap = (text: string) => ({ format: "sessnap-json/1", payload: new TextEncoder().encode(text) });
const text = (p: Uint8Array | undefined) => new TextDecoder().decode(p);

describe("--redis-wait-replicas on a single Redis", () => {
  let primary: SpawnedRedis;
  let replica: SpawnedRedis;
  const servers: ServerProcess[] = [];
  beforeAll(async () => {
    [primary, replica] = await Promise.all([spawnRedis(), spawnRedis()]);
  });
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop()));
    await Promise.all([primary?.stop(), replica?.stop()]);
  });
  const serve = async (...args: string[]) => {
    const s = await startServer(["session-store", "session-lease", "--store", primary.url, ...args]);
    servers.push(s);
    return s;
  };

  test("a value that is not a whole number from 0 to 16, or the flag with an SQLite store, is refused at start", async () => {
    for (const bad of ["-1", "17", "one", "1.5"]) {
      const { code, stderr } = await runServeExpectingFailure(["--store", primary.url, "--redis-wait-replicas", bad]);
      expect([code, stderr]).toEqual([2, expect.stringContaining("--redis-wait-replicas")]);
    }
    const { stderr } = await runServeExpectingFailure(["--store", "sqlite::memory:", "--redis-wait-replicas", "1"]);
    expect(stderr).toContain("--redis-wait-replicas applies to Redis stores only");
  });

  test("without a replica a write is UNAVAILABLE with the outcome unknown, never OK; the primary has it", async () => {
    const server = await serve("--redis-wait-replicas", "1", "--store-timeout", "1s");
    const sessions = grpcClient(SessionStoreService, server.address);
    const err = await expectCode(sessions.save({ sessionId: "unreplicated", snapshot: snap("v1") }), Code.Unavailable, "outcome unknown");
    expect(err.rawMessage).toContain("0 of 1 replicas acknowledged");
    await expectCode(grpcClient(SessionLeaseService, server.address).acquire({ sessionId: "unreplicated", owner: "o" }), Code.Unavailable, "outcome unknown");
    // Applied on the primary, exactly once: a server that does not wait reads it.
    const plain = await serve();
    expect(text((await grpcClient(SessionStoreService, plain.address).load({ sessionId: "unreplicated" })).snapshot?.payload)).toBe("v1");
  });

  test("with a replica a write is OK once the replica has it; when the replica is gone, reads keep flowing while writes wait", async () => {
    const r = replica.client();
    await r.replicaof("127.0.0.1", primary.port);
    await waitFor(async () => (await r.info("replication")).includes("master_link_status:up"), 15_000, "the replica to sync");
    r.disconnect();
    const server = await serve("--redis-wait-replicas", "1", "--store-timeout", "4s");
    const sessions = grpcClient(SessionStoreService, server.address);
    await sessions.save({ sessionId: "replicated", snapshot: snap("v2") });
    const onReplica = replica.client();
    expect((await onReplica.keys("*snapshot")).length).toBeGreaterThan(0);
    onReplica.disconnect();

    await replica.kill();
    const order: string[] = [];
    const write = expectCode(sessions.save({ sessionId: "replicated", snapshot: snap("v3") }), Code.Unavailable, "outcome unknown").then(() => order.push("write"));
    // The write blocks in WAIT on the writer connection; a read is answered meanwhile.
    expect((await sessions.list({})).sessions.map((s) => s.sessionId)).toContain("replicated");
    order.push("read");
    await write;
    expect(order).toEqual(["read", "write"]);
  });
});

describe("--redis-wait-replicas on a Redis Cluster", () => {
  let cluster: SpawnedCluster;
  let server: ServerProcess;
  beforeAll(async () => {
    cluster = await fileCluster();
    server = await startServer(["session-store", "--store", cluster.url, "--redis-wait-replicas", "1", "--store-timeout", "5s"]);
  });
  afterAll(async () => {
    await server?.stop();
  });

  test("a write is OK once its primary's replica has it; a primary whose replica is gone answers UNAVAILABLE (outcome unknown), the others OK", async () => {
    const sessions = grpcClient(SessionStoreService, server.address);
    const [alone, paired] = await cluster.primaries();
    const [onAlone, onPaired] = [await sessionIdOn(cluster, alone!, "alone"), await sessionIdOn(cluster, paired!, "paired")];
    await sessions.save({ sessionId: onAlone, snapshot: snap("replicated") });
    const [replica] = await cluster.replicasOf(alone!);
    await replica!.kill();
    try {
      await expectCode(sessions.save({ sessionId: onAlone, snapshot: snap("unreplicated") }), Code.Unavailable, "0 of 1 replicas acknowledged");
      await sessions.save({ sessionId: onPaired, snapshot: snap("replicated") });
    } finally {
      await replica!.restart();
      await cluster.waitHealthy();
    }
    await sessions.save({ sessionId: onAlone, snapshot: snap("replicated again") });
    expect(text((await sessions.load({ sessionId: onAlone })).snapshot?.payload)).toBe("replicated again");
  });
});
