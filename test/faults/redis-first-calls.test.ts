import { afterAll, describe, expect, test } from "vitest";
import { createClient } from "@connectrpc/connect";
import { EventLogService } from "../../gen/mecatl/driver/v1/event_log_pb.js";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { SessionLeaseService } from "../../gen/mecatl/driver/v1/session_lease_pb.js";
import { ScheduleOneShotReArmerService, ScheduleStoreService } from "../../gen/mecatl/driver/v1/schedule_store_pb.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { grpcTransport } from "../helpers/clients.js";
import { spawnRedis, type SpawnedRedis } from "../helpers/redis-server.js";
import { ev } from "../helpers/event-log.js";
import { scheduleRecord, ts, T0 } from "../helpers/schedules.js";

/**
 * ioredis copies custom commands (our Lua scripts) into an auto-pipeline when
 * it creates it. A server that defined each script lazily, on first use, broke
 * when the first calls of two script-backed RPCs arrived together: the second
 * script was missing from the pending pipeline (INTERNAL), and the pipeline's
 * replies then no longer matched its callbacks, which crashed the process.
 */
describe("a fresh server on Redis", () => {
  let redis: SpawnedRedis | undefined;
  let server: ServerProcess | undefined;
  afterAll(async () => {
    await server?.stop();
    await redis?.stop();
  });

  test("answers the first calls of every script-backed RPC sent together, and stays up", async () => {
    redis = await spawnRedis();
    server = await startServer(["--store", redis.url]);
    // One connection, so the calls reach the server in the same turn of its event loop.
    const transport = grpcTransport(server.address);
    const events = createClient(EventLogService, transport);
    const sessions = createClient(SessionStoreService, transport);
    const leases = createClient(SessionLeaseService, transport);
    const schedules = createClient(ScheduleStoreService, transport);
    const rearmer = createClient(ScheduleOneShotReArmerService, transport);
    // The payload's id is the session id: a sessnap payload of another session is refused (issue 12).
    const snapshot = (id: string) => ({ format: "sessnap-json/1", payload: new TextEncoder().encode(JSON.stringify({ id })) });
    const drain = async (id: string) => {
      const out = [];
      for await (const r of events.readAfter({ sessionId: id })) out.push(r);
      return out;
    };
    const calls: Array<[string, Promise<unknown>]> = [
      ["Append", events.append({ sessionId: "first-a", event: ev({ n: 1 }) })],
      ["ReadAfter", drain("first-b")],
      ["Save", sessions.save({ sessionId: "first", snapshot: snapshot("first") })],
      ["Create", sessions.create({ sessionId: "first-created", snapshot: snapshot("first-created") })],
      ["Delete", sessions.delete({ sessionId: "first-gone" })],
      ["Acquire", leases.acquire({ sessionId: "first", owner: "owner-a" })],
      ["SaveSchedule", schedules.saveSchedule({ name: "first", schedule: scheduleRecord({ Name: "first" }) })],
      ["ReArmOneShot", rearmer.reArmOneShot({ name: "first-missing", nextFire: ts(T0) }).catch((e: Error) => e.message)],
    ];
    const settled = await Promise.allSettled(calls.map(([, p]) => p));
    const failures = settled.flatMap((s, i) => (s.status === "rejected" ? [`${calls[i]![0]}: ${(s.reason as Error).message}`] : []));
    expect(failures).toEqual([]);
    expect(server.proc.exitCode).toBeNull();
    // The server is still serving, and what was written is there.
    expect((await sessions.load({ sessionId: "first" })).snapshot?.format).toBe("sessnap-json/1");
    expect(await drain("first-a")).toHaveLength(1);
  });
});
