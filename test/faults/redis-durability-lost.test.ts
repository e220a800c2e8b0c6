import { afterAll, describe, expect, test } from "vitest";
import { Code } from "@connectrpc/connect";
import { EventLogService } from "../../gen/mecatl/driver/v1/event_log_pb.js";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { grpcClient } from "../helpers/clients.js";
import { expectCode } from "../helpers/errors.js";
import { spawnRedis, type SpawnedRedis } from "../helpers/redis-server.js";
import { ev, readAfterAll } from "../helpers/event-log.js";
import { waitFor } from "../helpers/wait.js";
import { logEntries, metricSample, overallHealth, ServingStatus as Status } from "../helpers/observe.js";

/**
 * Durability was verified once, at start. A Redis restarted without
 * `appendonly` (or changed with CONFIG SET) was then used as if it were
 * durable: health SERVING, writes acknowledged (docs/DESIGN.md principle 1). Then
 * writes were refused, but as INTERNAL "internal storage error" (issue 9).
 */
describe("a strict-mode server whose Redis stops being durable", () => {
  let redis: SpawnedRedis | undefined;
  let server: ServerProcess | undefined;
  afterAll(async () => {
    await server?.stop();
    await redis?.stop();
  });

  test("turns NOT_SERVING and refuses writes with UNAVAILABLE naming the setting, logged once, until Redis is durable again; reads go on", async () => {
    redis = await spawnRedis();
    server = await startServer(["--store", redis.url, "--metrics-listen", "127.0.0.1:0"]);
    const events = grpcClient(EventLogService, server.address);
    const sessions = grpcClient(SessionStoreService, server.address);
    await events.append({ sessionId: "dur", event: ev({ n: 1 }) });

    const admin = redis.client();
    try {
      await admin.config("SET", "appendfsync", "everysec");
      // Drop the server's connections: it reconnects to a server that is no longer durable.
      await admin.client("KILL", "TYPE", "normal", "SKIPME", "yes");
      await waitFor(() => logEntries(server!, "store cannot take writes; health is NOT_SERVING").some((e) => String(e.problem).includes("not durable")), 10_000, "the server to find Redis not durable");
      expect(await overallHealth(server.address)).toBe(Status.NOT_SERVING);
      for (let i = 0; i < 5; i++) {
        await expectCode(events.append({ sessionId: "dur", event: ev({ n: 2 }) }), Code.Unavailable, 'Redis is not durable: appendfsync is "everysec" (needs "always")');
      }
      const refused = await expectCode(sessions.save({ sessionId: "dur", snapshot: { format: "sessnap-json/1", payload: new Uint8Array([1]) } }), Code.Unavailable);
      expect(refused.rawMessage).toContain("nothing was written");
      expect(await readAfterAll(events, { sessionId: "dur" })).toHaveLength(1);
      await expectCode(sessions.load({ sessionId: "dur" }), Code.NotFound);
      // One line for the change of health, one for the first refused write; the repeats are only counted.
      const notDurable = () => logEntries(server!, "store cannot take writes; health is NOT_SERVING").filter((e) => String(e.problem).includes("not durable"));
      expect(notDurable()).toHaveLength(1);
      expect(logEntries(server, "store failure")).toHaveLength(1);
      expect(logEntries(server, "store failure")[0]).toMatchObject({ kind: "not_durable" });
      expect(await metricSample(server.metricsAddress!, 'mecatl_drivers_store_failures_total{kind="not_durable"}')).toBe(6);
      expect(server.stderr.join("\n")).not.toContain("internal error");

      // Fixed without a restart: the periodic check notices.
      await admin.config("SET", "appendfsync", "always");
      await waitFor(async () => (await overallHealth(server!.address)) === Status.SERVING, 15_000, "health SERVING again");
      await events.append({ sessionId: "dur", event: ev({ n: 3 }) });
      expect(await readAfterAll(events, { sessionId: "dur" })).toHaveLength(2);
    } finally {
      admin.disconnect();
    }
    expect(logEntries(server, "store takes writes again; health is SERVING")).toHaveLength(1);
  });
});
