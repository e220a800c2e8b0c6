import { afterAll, describe, expect, test } from "vitest";
import { Code } from "@connectrpc/connect";
import { EventLogService } from "../../gen/mecatl/driver/v1/event_log_pb.js";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { grpcClient } from "../helpers/clients.js";
import { spawnRedis, type SpawnedRedis } from "../helpers/redis-server.js";
import { ev, readAfterAll } from "../helpers/event-log.js";
import { waitFor } from "../helpers/wait.js";
import { logEntries, overallHealth, timed, watchHealth, ServingStatus as Status, type TimedOutcome } from "../helpers/observe.js";

/** `--store-timeout` of this server. */
const STORE_TIMEOUT_MS = 1000;
/** Generous slack: reconnect backoff and process scheduling on a shared machine. */
const MARGIN_MS = 4000;

/**
 * Redis killed under a running server (issue 9). Before, calls hung 6-8 s
 * and then failed as INTERNAL. The contract: every call ends with
 * UNAVAILABLE within `--store-timeout` plus a margin, health turns
 * NOT_SERVING, and SERVING again once Redis is back, each change logged once.
 */
describe("Redis killed", () => {
  let redis: SpawnedRedis | undefined;
  let server: ServerProcess | undefined;
  afterAll(async () => {
    await server?.stop();
    await redis?.stop();
  });

  test("calls fail with UNAVAILABLE within --store-timeout + margin; health NOT_SERVING, then SERVING after a restart", async () => {
    redis = await spawnRedis();
    server = await startServer(["--store", redis.url, "--store-timeout", `${STORE_TIMEOUT_MS}ms`]);
    const events = grpcClient(EventLogService, server.address);
    const sessions = grpcClient(SessionStoreService, server.address);
    const snapshot = { format: "sessnap-json/1", payload: new Uint8Array([1, 2, 3]) };
    await events.append({ sessionId: "down", event: ev({ n: 1 }) });
    await sessions.save({ sessionId: "down", snapshot });
    const health = watchHealth(server.address);
    await waitFor(() => health.seen.includes(Status.SERVING), 5000, "Watch to report SERVING");

    await redis.kill();
    const calls = async (): Promise<Record<string, TimedOutcome>> => {
      const [append, save, load, list, read] = await Promise.all([
        timed(events.append({ sessionId: "down", event: ev({ n: 2 }) })),
        timed(sessions.save({ sessionId: "down", snapshot })),
        timed(sessions.load({ sessionId: "down" })),
        timed(sessions.list({})),
        timed(readAfterAll(events, { sessionId: "down" })),
      ]);
      return { append, save, load, list, read };
    };
    const outcome = (o: TimedOutcome) => `${o.error === undefined ? "OK" : Code[o.error.code]} after ${o.ms < STORE_TIMEOUT_MS + MARGIN_MS ? "less than" : "more than"} ${STORE_TIMEOUT_MS + MARGIN_MS} ms`;
    const expected = `Unavailable after less than ${STORE_TIMEOUT_MS + MARGIN_MS} ms`;
    // Sent at once, before the server may have noticed, and again once health says so.
    const first = await calls();
    expect(Object.fromEntries(Object.entries(first).map(([k, v]) => [k, outcome(v)]))).toEqual({ append: expected, save: expected, load: expected, list: expected, read: expected });
    await waitFor(async () => (await overallHealth(server!.address)) === Status.NOT_SERVING, STORE_TIMEOUT_MS + MARGIN_MS, "NOT_SERVING while Redis is down");
    const second = await calls();
    expect(Object.fromEntries(Object.entries(second).map(([k, v]) => [k, outcome(v)]))).toEqual({ append: expected, save: expected, load: expected, list: expected, read: expected });

    await redis.restart();
    await waitFor(async () => (await overallHealth(server!.address)) === Status.SERVING, 15_000, "SERVING after Redis restarted");
    await waitFor(() => health.seen.lastIndexOf(Status.SERVING) > health.seen.indexOf(Status.NOT_SERVING) && health.seen.includes(Status.NOT_SERVING), 5000, "Watch to report NOT_SERVING then SERVING");
    await health.stop();
    await events.append({ sessionId: "down", event: ev({ n: 3 }) });
    expect((await sessions.load({ sessionId: "down" })).snapshot?.payload).toEqual(snapshot.payload);
    // Each change of health is logged once, however often ioredis tried to reconnect meanwhile (README Failures).
    expect(logEntries(server, "store cannot take writes; health is NOT_SERVING").map((e) => e.problem)).toEqual([
      "Redis connection lost; reconnecting (and, in strict mode, verifying durability again)",
    ]);
    expect(logEntries(server, "store takes writes again; health is SERVING")).toHaveLength(1);
  });
});
