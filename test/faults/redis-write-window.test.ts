import { afterAll, describe, expect, test } from "vitest";
import { Code, ConnectError } from "@connectrpc/connect";
import { SessionLeaseService } from "../../gen/mecatl/driver/v1/session_lease_pb.js";
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

  test("writes held back are answered 'nothing was written' and never applied; sent ones 'outcome unknown'", async () => {
    redis = await spawnRedis();
    server = await startServer(["--store", redis.url, "--store-timeout", `${STORE_TIMEOUT_MS}ms`]);
    const leases = grpcClient(SessionLeaseService, server.address);
    await leases.acquire({ sessionId: "warm", owner: "a" });
    process.kill(redis.pid, "SIGSTOP");
    let outcomes: Array<{ id: string; message: string }>;
    try {
      outcomes = await Promise.all(
        Array.from({ length: CALLS }, async (_, i) => {
          const id = `stalled-${i}`;
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
    // The window's first limit (16) was sent; the rest waited. When the sent ones timed out, waiting writes took their
    // places, and the few with time left were sent too (outcome unknown, truthfully); the others were refused unsent.
    expect(unknown.length).toBeGreaterThanOrEqual(16);
    expect(unknown.length).toBeLessThanOrEqual(32);
    expect(unsent[0]!.message).toMatch(/^Redis did not answer within 1000 ms \(earlier writes to Redis were not answered\); nothing was written$/);
    // Redis answers again: every call refused unsent left its session free, so another owner acquires it.
    for (const { id } of unsent) {
      const granted = await leases.acquire({ sessionId: id, owner: "b" });
      expect(granted.lease?.owner).toBe("b");
    }
  });
});
