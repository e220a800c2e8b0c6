import { afterAll, describe, expect, test } from "vitest";
import { Code } from "@connectrpc/connect";
import { EventLogService } from "../../gen/mecatl/driver/v1/event_log_pb.js";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { Health, HealthCheckResponse_ServingStatus as Status } from "../../gen/grpc/health/v1/health_pb.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { grpcClient } from "../helpers/clients.js";
import { expectCode } from "../helpers/errors.js";
import { spawnRedis, type SpawnedRedis } from "../helpers/redis-server.js";
import { ev, readAfterAll } from "../helpers/event-log.js";
import { waitFor } from "../helpers/wait.js";

/**
 * Durability was verified once, at start. A Redis restarted without
 * `appendonly` (or changed with CONFIG SET) was then used as if it were
 * durable: health SERVING, writes acknowledged (DESIGN.md principle 1).
 */
describe("a strict-mode server whose Redis stops being durable", () => {
  let redis: SpawnedRedis | undefined;
  let server: ServerProcess | undefined;
  afterAll(async () => {
    await server?.stop();
    await redis?.stop();
  });

  test("turns NOT_SERVING and refuses writes until Redis is durable again; reads go on", async () => {
    redis = await spawnRedis();
    server = await startServer(["--store", redis.url]);
    const events = grpcClient(EventLogService, server.address);
    const sessions = grpcClient(SessionStoreService, server.address);
    const health = grpcClient(Health, server.address);
    const status = async () => (await health.check({ service: "" })).status;
    await events.append({ sessionId: "dur", event: ev({ n: 1 }) });

    const admin = redis.client();
    try {
      await admin.config("SET", "appendfsync", "everysec");
      // Drop the server's connections: it reconnects to a server that is no longer durable.
      await admin.client("KILL", "TYPE", "normal", "SKIPME", "yes");
      await waitFor(() => server!.stderr.some((l) => l.includes("Redis is no longer durable")), 10_000, "the server to find Redis not durable");
      expect(await status()).toBe(Status.NOT_SERVING);
      await expectCode(events.append({ sessionId: "dur", event: ev({ n: 2 }) }), Code.Unavailable);
      await expectCode(sessions.save({ sessionId: "dur", snapshot: { format: "sessnap-json/1", payload: new Uint8Array([1]) } }), Code.Unavailable);
      expect(await readAfterAll(events, { sessionId: "dur" })).toHaveLength(1);
      await expectCode(sessions.load({ sessionId: "dur" }), Code.NotFound);

      // Fixed without a restart: the periodic check notices.
      await admin.config("SET", "appendfsync", "always");
      await waitFor(async () => (await status()) === Status.SERVING, 15_000, "health SERVING again");
      await events.append({ sessionId: "dur", event: ev({ n: 3 }) });
      expect(await readAfterAll(events, { sessionId: "dur" })).toHaveLength(2);
    } finally {
      admin.disconnect();
    }
    expect(server.stderr.some((l) => l.includes("Redis is durable again"))).toBe(true);
  });
});
