import { afterEach, describe, expect, test } from "vitest";
import { Code } from "@connectrpc/connect";
import { EventLogService } from "../../gen/mecatl/driver/v1/event_log_pb.js";
import { DURABILITY_CHECK_MS, durabilityCheckTimeoutMs } from "../../services/storage/redis-durability-watch.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { grpcClient } from "../helpers/clients.js";
import { expectCode } from "../helpers/errors.js";
import { spawnRedis, type SpawnedRedis } from "../helpers/redis-server.js";
import { startFaultProxy, type FaultProxy } from "../helpers/fault-proxy.js";
import { ev, readAfterAll } from "../helpers/event-log.js";
import { waitFor } from "../helpers/wait.js";
import { METRICS_FLAGS, metricValue } from "../helpers/metrics.js";
import { logEntries, overallHealth, timed, ServingStatus as Status } from "../helpers/observe.js";

/** `--store-timeout` of these servers; one durability check may take half of it. */
const STORE_TIMEOUT_MS = 1000;
/** Slack for process scheduling on a shared machine. */
const MARGIN_MS = 3000;

/**
 * The durability watch must fail closed (issue 9, deliverable 3). On the
 * code before it, one check started while Redis was down never settled and
 * every later check waited behind it: Redis made non-durable after an outage
 * went unnoticed (writes acknowledged, health SERVING, nothing logged); and a
 * check that got no answer left the server SERVING forever.
 */
describe("the Redis durability watch", () => {
  let redis: SpawnedRedis | undefined;
  let server: ServerProcess | undefined;
  let proxy: FaultProxy | undefined;
  afterEach(async () => {
    await server?.stop();
    await proxy?.close();
    await redis?.stop();
    server = proxy = redis = undefined;
  });

  test("detects a durability change made after an outage (with a write sent during it) within the check interval", async () => {
    redis = await spawnRedis();
    server = await startServer(["--store", redis.url, "--store-timeout", `${STORE_TIMEOUT_MS}ms`, ...METRICS_FLAGS]);
    const events = grpcClient(EventLogService, server.address);
    await events.append({ sessionId: "outage", event: ev({ n: 1 }) });
    const checksWhileDown = () => metricValue(server!.metricsAddress!, "mecatl_drivers_redis_durability_checks_total", { outcome: "not_connected" });

    await redis.kill();
    await waitFor(async () => (await overallHealth(server!.address)) === Status.NOT_SERVING, STORE_TIMEOUT_MS + MARGIN_MS, "NOT_SERVING while Redis is down");
    const duringOutage = timed(events.append({ sessionId: "outage", event: ev({ n: 2 }) }));
    // The fault's shape: Redis stays down across at least one periodic check, which the server counts.
    const before = await checksWhileDown();
    await waitFor(async () => (await checksWhileDown()) > before, DURABILITY_CHECK_MS + MARGIN_MS, "a periodic durability check while Redis is down");
    await redis.restart();
    await waitFor(async () => (await overallHealth(server!.address)) === Status.SERVING, DURABILITY_CHECK_MS + MARGIN_MS, "SERVING once Redis is back and checked");
    const outageWrite = await duringOutage;
    expect(outageWrite.error?.code, outageWrite.error?.message).toBe(Code.Unavailable);

    const admin = redis.client();
    try {
      await admin.config("SET", "appendfsync", "everysec");
      const changed = performance.now();
      await waitFor(async () => (await overallHealth(server!.address)) === Status.NOT_SERVING, DURABILITY_CHECK_MS + STORE_TIMEOUT_MS + MARGIN_MS, "NOT_SERVING after appendfsync everysec");
      expect(performance.now() - changed).toBeLessThan(DURABILITY_CHECK_MS + STORE_TIMEOUT_MS + MARGIN_MS);
      await expectCode(events.append({ sessionId: "outage", event: ev({ n: 3 }) }), Code.Unavailable, "appendfsync");
      const notDurable = () => logEntries(server!, "store cannot take writes; health is NOT_SERVING").filter((e) => String(e.problem).includes("not durable"));
      await waitFor(() => notDurable().length > 0, MARGIN_MS, "the NOT_SERVING log line");
      expect(notDurable()).toHaveLength(1);

      // A later check passes again.
      await admin.config("SET", "appendfsync", "always");
      await waitFor(async () => (await overallHealth(server!.address)) === Status.SERVING, DURABILITY_CHECK_MS + STORE_TIMEOUT_MS + MARGIN_MS, "SERVING after appendfsync always");
      await events.append({ sessionId: "outage", event: ev({ n: 4 }) });
    } finally {
      admin.disconnect();
    }
    // Only acknowledged writes are in the log: the ones refused left nothing behind.
    const bodies = (await readAfterAll(events, { sessionId: "outage" })).map((r) => JSON.parse(new TextDecoder().decode(r.event?.payload)) as { n: number });
    expect(bodies.map((b) => b.n)).toEqual([1, 4]);
  });

  test("a check that gets no answer counts as not durable: writes refused at once, NOT_SERVING, one line; a later check passes", async () => {
    redis = await spawnRedis();
    proxy = await startFaultProxy(redis.port);
    server = await startServer(["--store", `redis://${proxy.address}`, "--store-timeout", `${STORE_TIMEOUT_MS}ms`, ...METRICS_FLAGS]);
    const events = grpcClient(EventLogService, server.address);
    await events.append({ sessionId: "silent", event: ev({ n: 1 }) });

    // Redis stops answering but the connection stays open: the next periodic check hangs.
    proxy.setMode("blackhole");
    await waitFor(async () => (await overallHealth(server!.address)) === Status.NOT_SERVING, DURABILITY_CHECK_MS + STORE_TIMEOUT_MS + MARGIN_MS, "NOT_SERVING after a check got no answer");
    // The server's log line can reach this process after the health answer does.
    await waitFor(() => logEntries(server!, "store cannot take writes; health is NOT_SERVING").length > 0, MARGIN_MS, "the NOT_SERVING log line");
    const lines = logEntries(server, "store cannot take writes; health is NOT_SERVING");
    expect(lines).toHaveLength(1);
    expect(await metricValue(server.metricsAddress!, "mecatl_drivers_redis_durability_checks_total", { outcome: "failed" })).toBeGreaterThanOrEqual(1);
    expect(lines[0]!.problem).toBe(`Redis is not known to be durable: the durability check (CONFIG GET appendonly, appendfsync) did not answer within ${durabilityCheckTimeoutMs(STORE_TIMEOUT_MS)} ms`);
    const refused = await timed(events.append({ sessionId: "silent", event: ev({ n: 2 }) }));
    expect(refused.error?.code, refused.error?.message).toBe(Code.Unavailable);
    expect(refused.error?.rawMessage).toContain("nothing was written");
    expect(refused.ms).toBeLessThan(STORE_TIMEOUT_MS + MARGIN_MS);

    // Redis answers again on a fresh connection: the reconnect's check passes.
    proxy.setMode("pass");
    proxy.resetAll();
    await waitFor(async () => (await overallHealth(server!.address)) === Status.SERVING, DURABILITY_CHECK_MS + STORE_TIMEOUT_MS + MARGIN_MS, "SERVING after Redis answers again");
    await events.append({ sessionId: "silent", event: ev({ n: 3 }) });
    expect(await readAfterAll(events, { sessionId: "silent" })).toHaveLength(2);
    expect(logEntries(server, "store takes writes again; health is SERVING").length).toBeGreaterThanOrEqual(1);
  });
});
