import { afterAll, describe, expect, test } from "vitest";
import { Code, ConnectError } from "@connectrpc/connect";
import { SessionLeaseService } from "../../gen/mecatl/driver/v1/session_lease_pb.js";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { fileCluster } from "../helpers/backends.js";
import { sessionIdOn, type SpawnedCluster } from "../helpers/redis-cluster.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { grpcClient } from "../helpers/clients.js";
import { spawnRedis, type SpawnedRedis } from "../helpers/redis-server.js";

/** `--store-timeout` of this server. */
const STORE_TIMEOUT_MS = 1000;
/** Acquires sent at once while Redis is stopped: more than the write window's first limit (16). */
const CALLS = 40;

/**
 * The write window (issue 11, services/storage/redis-write-window.ts): a
 * server holds recorded writes beyond an adaptive limit until earlier ones
 * are answered. When Redis stops answering, the writes held back are never
 * sent: each fails UNAVAILABLE saying nothing was written, and stays
 * unapplied after Redis resumes (the answer matches what is stored), while
 * the writes that were sent fail saying the outcome is unknown.
 */
describe("Redis write window while Redis stalls", () => {
  let redis: SpawnedRedis | undefined;
  let server: ServerProcess | undefined;
  afterAll(async () => {
    if (redis !== undefined) process.kill(redis.pid, "SIGCONT");
    await server?.stop();
    await redis?.stop();
  });

  test("writes held back are answered 'nothing was written' and never applied; sent ones 'outcome unknown'; none are sent into the stall as places time out", async () => {
    redis = await spawnRedis();
    // Relaxed: the durability checks that fail while Redis is stopped would otherwise refuse the later writes before the window does.
    server = await startServer(["--store", redis.url, "--store-timeout", `${STORE_TIMEOUT_MS}ms`, "--redis-durability", "relaxed"]);
    const leases = grpcClient(SessionLeaseService, server.address);
    await leases.acquire({ sessionId: "warm", owner: "a" });
    process.kill(redis.pid, "SIGSTOP");
    let outcomes: Array<{ id: string; message: string }>;
    try {
      outcomes = await Promise.all(
        Array.from({ length: CALLS }, async (_, i) => {
          const id = `stalled-${i}`;
          // A second half sent later: still waiting, with time left, when the first writes sent stop waiting for Redis.
          if (i >= CALLS / 2) await new Promise((r) => setTimeout(r, STORE_TIMEOUT_MS / 2));
          try {
            await leases.acquire({ sessionId: id, owner: "a" });
            return { id, message: "OK" };
          } catch (err) {
            const e = ConnectError.from(err);
            expect(Code[e.code]).toBe("Unavailable");
            return { id, message: e.rawMessage };
          }
        }),
      );
    } finally {
      process.kill(redis.pid, "SIGCONT");
    }
    const unsent = outcomes.filter((o) => o.message.endsWith("nothing was written"));
    const unknown = outcomes.filter((o) => o.message.includes("may or may not have been applied (outcome unknown)"));
    expect(unsent.length + unknown.length).toBe(CALLS);
    // The window's first limit (16) was sent; the rest waited. The sent ones keep their places until Redis answers
    // them, so no more was sent into the stalled Redis: the others were refused unsent.
    expect(unknown.length).toBe(16);
    expect(unsent[0]!.message).toMatch(/^Redis did not answer within 1000 ms \(earlier writes to Redis were not answered\); nothing was written$/);
    // Redis answers again: every call refused unsent left its session free, so another owner acquires it.
    for (const { id } of unsent) {
      const granted = await leases.acquire({ sessionId: id, owner: "b" });
      expect(granted.lease?.owner).toBe("b");
    }
  });
});

/**
 * On a Redis Cluster the window is kept per node: writes stuck on a stalled
 * primary hold only that primary's places, and the other primaries' writes
 * are sent and answered meanwhile.
 */
describe("Redis Cluster write windows while one primary stalls", () => {
  let cluster: SpawnedCluster | undefined;
  let server: ServerProcess | undefined;
  let stopped: number | undefined;
  afterAll(async () => {
    if (stopped !== undefined) process.kill(stopped, "SIGCONT");
    await server?.stop();
  });

  test("writes to the healthy primaries are answered OK while more writes than the window holds wait on the stalled one", async () => {
    // A node timeout far longer than the stall: no failover starts meanwhile.
    cluster = await fileCluster({ nodeTimeoutMs: 15_000 });
    server = await startServer(["session-store", "--store", cluster.url, "--store-timeout", `${STORE_TIMEOUT_MS}ms`]);
    const sessions = grpcClient(SessionStoreService, server.address);
    const [stalled, healthy] = await cluster.primaries();
    const onStalled = await Promise.all(Array.from({ length: CALLS }, (_, i) => sessionIdOn(cluster!, stalled!, `stalled-${i}`)));
    const onHealthy = await Promise.all(Array.from({ length: 20 }, (_, i) => sessionIdOn(cluster!, healthy!, `healthy-${i}`)));
    const snapshot = { format: "sessnap-json/1", payload: new TextEncoder().encode("{}") };
    await sessions.save({ sessionId: onHealthy[0]!, snapshot });
    stopped = stalled!.pid!;
    process.kill(stopped, "SIGSTOP");
    try {
      const stuck = onStalled.map((id) => sessions.save({ sessionId: id, snapshot }).then(() => "OK", (err: unknown) => Code[ConnectError.from(err).code]));
      // Sent once the stalled primary's window is full of writes that will not be answered.
      await new Promise((r) => setTimeout(r, 100));
      // Answered at once, not after the stuck writes' --store-timeout gave their places back.
      const started = performance.now();
      const results = await Promise.all(
        onHealthy.map((id) =>
          sessions.save({ sessionId: id, snapshot }).then(
            () => (performance.now() - started < STORE_TIMEOUT_MS / 2 ? "OK soon" : "OK late"),
            (err: unknown) => ConnectError.from(err).rawMessage,
          ),
        ),
      );
      expect(results).toEqual(onHealthy.map(() => "OK soon"));
      expect(new Set(await Promise.all(stuck))).toEqual(new Set(["Unavailable"]));
    } finally {
      process.kill(stopped, "SIGCONT");
      stopped = undefined;
    }
    await cluster.waitHealthy();
  });
});
