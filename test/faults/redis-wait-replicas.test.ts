/**
 * `--redis-wait-replicas N` (issue 13, deliverable 3): a write is answered
 * OK only once N replicas acknowledged it (WAIT on its primary); when they
 * do not within --store-timeout the answer is UNAVAILABLE saying the outcome
 * is unknown (the primary has it, and the message states the time waited),
 * never OK; reads and the durability check never queue behind a blocked
 * WAIT; while a primary has fewer than N replicas in sync, health is
 * NOT_SERVING (from the start, too) and its writes are refused up front,
 * nothing written. On a single Redis with and without a replica, and on a
 * Redis Cluster whose replica of one primary is gone.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Code } from "@connectrpc/connect";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { SessionLeaseService } from "../../gen/mecatl/driver/v1/session_lease_pb.js";
import { fileCluster } from "../helpers/backends.js";
import { sessionIdOn, type SpawnedCluster } from "../helpers/redis-cluster.js";
import { spawnRedis, type SpawnedRedis } from "../helpers/redis-server.js";
import { runServeExpectingFailure, startServer, waitForLog, type ServerProcess } from "../helpers/server.js";
import { grpcClient } from "../helpers/clients.js";
import { expectCode } from "../helpers/errors.js";
import { waitFor } from "../helpers/wait.js";
import { Health, HealthCheckResponse_ServingStatus as Status } from "../../gen/grpc/health/v1/health_pb.js";

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

  /** Makes `replica` replicate `primary`, waits until it is in sync, and serves with `--redis-wait-replicas 1 --store-timeout 4s`. */
  const serveReplicated = async () => {
    const r = replica.client();
    await r.replicaof("127.0.0.1", primary.port);
    await waitFor(async () => (await r.info("replication")).includes("master_link_status:up"), 15_000, "the replica to sync");
    r.disconnect();
    return serve("--redis-wait-replicas", "1", "--store-timeout", "4s");
  };

  test("a value that is not a whole number from 0 to 16, or the flag with an SQLite store, is refused at start", async () => {
    for (const bad of ["-1", "17", "one", "1.5"]) {
      const { code, stderr } = await runServeExpectingFailure(["--store", primary.url, "--redis-wait-replicas", bad]);
      expect([code, stderr]).toEqual([2, expect.stringContaining("--redis-wait-replicas")]);
    }
    const { stderr } = await runServeExpectingFailure(["--store", "sqlite::memory:", "--redis-wait-replicas", "1"]);
    expect(stderr).toContain("--redis-wait-replicas applies to Redis stores only");
  });

  test("with fewer replicas in sync than N it starts NOT_SERVING (logged with the primary and the counts) and refuses writes before sending them; SERVING once a replica is in sync", async () => {
    const server = await serve("--redis-wait-replicas", "1", "--store-timeout", "2s");
    const health = grpcClient(Health, server.address);
    expect((await health.check({ service: "" })).status).toBe(Status.NOT_SERVING);
    const logged = (await waitForLog(server, "store cannot take writes; health is NOT_SERVING")).entry.problem as string;
    expect(logged).toContain(`Redis primary 127.0.0.1:${primary.port} has 0 of 1 replicas connected`);
    const sessions = grpcClient(SessionStoreService, server.address);
    const err = await expectCode(sessions.save({ sessionId: "unreplicated", snapshot: snap("v1") }), Code.Unavailable, "0 of 1 replicas connected");
    expect(err.rawMessage).toContain("nothing was written");
    await expectCode(grpcClient(SessionLeaseService, server.address).acquire({ sessionId: "unreplicated", owner: "o" }), Code.Unavailable, "0 of 1 replicas connected");
    // Refused before anything was sent: the primary holds nothing of it.
    const raw = primary.client();
    expect(await raw.keys("*unreplicated*")).toEqual([]);
    raw.disconnect();

    const r = replica.client();
    await r.replicaof("127.0.0.1", primary.port);
    r.disconnect();
    await waitFor(async () => (await health.check({ service: "" })).status === Status.SERVING, 20_000, "SERVING once the replica is in sync");
    await sessions.save({ sessionId: "unreplicated", snapshot: snap("v1") });
  });

  test("a replica that stops answering: health stays SERVING (the check has a connection of its own, not queued behind a blocked WAIT); the write's message states the time it waited", async () => {
    const server = await serveReplicated();
    const sessions = grpcClient(SessionStoreService, server.address);
    const health = grpcClient(Health, server.address);
    await sessions.save({ sessionId: "stalled", snapshot: snap("v0") });
    // Stopped, the replica stays "online" on the primary (until repl-timeout) but acknowledges nothing.
    process.kill(replica.pid, "SIGSTOP");
    const statuses = new Set<string>();
    const errors: string[] = [];
    try {
      const until = Date.now() + 9_000;
      // Three writers keep a WAIT blocked on the writer connection all the time, across at least one periodic check.
      const writer = async (w: number) => {
        for (let i = 0; Date.now() < until; i++) {
          const err = await expectCode(sessions.save({ sessionId: `stalled-${w}`, snapshot: snap(`v${i}`) }), Code.Unavailable);
          errors.push(err.rawMessage);
        }
      };
      const watcher = async () => {
        while (Date.now() < until) {
          statuses.add(Status[(await health.check({ service: "" })).status]);
          await new Promise((res) => setTimeout(res, 100));
        }
      };
      await Promise.all([writer(1), writer(2), writer(3), watcher()]);
    } finally {
      process.kill(replica.pid, "SIGCONT");
    }
    expect([...statuses]).toEqual(["SERVING"]);
    expect(errors.length).toBeGreaterThan(0);
    for (const message of errors) {
      expect(message).not.toContain("not known to be durable");
      // "only 0 of 1 replicas acknowledged it within N ms", or, for a write queued behind another's
      // WAIT and cut off at its deadline, "Redis did not answer within N ms": either way N is the
      // call's own time (--store-timeout 4 s), not the last retry's share of it.
      expect(message).toMatch(/only 0 of 1 replicas acknowledged it within \d+ ms|Redis did not answer within \d+ ms/);
      expect(Number(/within (\d+) ms/.exec(message)?.[1]), message).toBeGreaterThanOrEqual(3500);
      expect(message).toContain("outcome unknown");
    }
  });

  test("with a replica a write is OK once the replica has it; when the replica is gone, reads keep flowing while writes wait", async () => {
    const server = await serveReplicated();
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
  const servers: ServerProcess[] = [];
  beforeAll(async () => {
    cluster = await fileCluster();
    server = await startServer(["session-store", "--store", cluster.url, "--redis-wait-replicas", "1", "--store-timeout", "5s"]);
    servers.push(server);
  });
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop()));
  });

  test("a write is OK once its primary's replica has it; while a primary has no replica its slots refuse writes up front (nothing written) and health is NOT_SERVING, the others' slots take them", async () => {
    const sessions = grpcClient(SessionStoreService, server.address);
    const health = grpcClient(Health, server.address);
    const [alone, paired] = await cluster.primaries();
    const [onAlone, onPaired] = [await sessionIdOn(cluster, alone!, "alone"), await sessionIdOn(cluster, paired!, "paired")];
    const never = await sessionIdOn(cluster, alone!, "never");
    await sessions.save({ sessionId: onAlone, snapshot: snap("replicated") });
    expect((await health.check({ service: "" })).status).toBe(Status.SERVING);
    const [replica] = await cluster.replicasOf(alone!);
    await replica!.kill();
    try {
      // The first write after the loss may still be sent and fall short (outcome unknown); it
      // starts a check, and from then on the primary's writes are refused before they are sent.
      await waitFor(
        async () => (await expectCode(sessions.save({ sessionId: never, snapshot: snap("unreplicated") }), Code.Unavailable)).rawMessage.includes(`Redis primary ${alone!.address} has 0 of 1 replicas connected`),
        15_000,
        "writes to the lonely primary refused up front",
      );
      const err = await expectCode(sessions.save({ sessionId: never, snapshot: snap("unreplicated") }), Code.Unavailable, "0 of 1 replicas connected");
      expect(err.rawMessage).toContain("nothing was written");
      expect((await health.check({ service: "" })).status).toBe(Status.NOT_SERVING);
      await sessions.save({ sessionId: onPaired, snapshot: snap("replicated") });
    } finally {
      await replica!.restart();
      await cluster.waitHealthy();
    }
    await waitFor(async () => (await health.check({ service: "" })).status === Status.SERVING, 20_000, "SERVING once the replica is back");
    await sessions.save({ sessionId: onAlone, snapshot: snap("replicated again") });
    expect(text((await sessions.load({ sessionId: onAlone })).snapshot?.payload)).toBe("replicated again");
  });

  test("more replicas asked for than every primary has: the server starts NOT_SERVING, logs the primary and the counts, and refuses every write up front", async () => {
    const greedy = await startServer(["session-store", "--store", cluster.url, "--redis-wait-replicas", "2", "--store-timeout", "2s"]);
    servers.push(greedy);
    expect((await grpcClient(Health, greedy.address).check({ service: "" })).status).toBe(Status.NOT_SERVING);
    const logged = (await waitForLog(greedy, "store cannot take writes; health is NOT_SERVING")).entry.problem as string;
    expect(logged).toMatch(/Redis primary 127\.0\.0\.1:\d+ has 1 of 2 replicas connected/);
    const started = performance.now();
    const err = await expectCode(grpcClient(SessionStoreService, greedy.address).save({ sessionId: "greedy", snapshot: snap("x") }), Code.Unavailable, "1 of 2 replicas connected");
    expect(err.rawMessage).toContain("nothing was written");
    // Refused at once, not after waiting for replicas that cannot answer.
    expect(performance.now() - started).toBeLessThan(1500);
  });
});
