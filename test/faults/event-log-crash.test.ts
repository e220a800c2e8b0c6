import { afterAll, describe, expect, test } from "vitest";
import { EventLogService } from "../../gen/mecatl/driver/v1/event_log_pb.js";
import { sharedBackends, type TestBackend } from "../helpers/backends.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { grpcClient } from "../helpers/clients.js";
import { waitFor } from "../helpers/wait.js";
import { METRICS_FLAGS } from "../helpers/metrics.js";
import { spawnRedis, type SpawnedRedis } from "../helpers/redis-server.js";
import { appendSeqs, body, decodeEnvelope, ev, parkedFollow, readAfterAll } from "../helpers/event-log.js";

const CLIENTS = 16;
/** Clients 0..11 append to their own session; clients 12..15 share one. */
const sessionOf = (c: number) => (c < 12 ? `crash-${c}` : "crash-shared");

describe.each(sharedBackends())("EventLogService after SIGKILL on $name", (backend: TestBackend) => {
  let server: ServerProcess | undefined;
  afterAll(async () => {
    await server?.stop();
    await backend.teardown();
  });

  test("every acknowledged append survives once and in order, and cursors issued before the kill resume exactly", async () => {
    const { store, redis } = await backend.setup();
    server = await startServer(["event-log", "--store", store]);
    const acked: Array<Array<{ seq: number; cursor: string }>> = Array.from({ length: CLIENTS }, () => []);
    let stopped = false;
    const runners = Array.from({ length: CLIENTS }, async (_, c) => {
      const client = grpcClient(EventLogService, server!.address);
      for (let seq = 0; !stopped; seq++) {
        try {
          const { cursor } = await client.append({ sessionId: sessionOf(c), event: ev({ client: c, seq }) });
          acked[c]!.push({ seq, cursor });
        } catch {
          return;
        }
      }
    });
    await waitFor(() => acked.every((a) => a.length >= 20), 30_000, "every client to have 20 acknowledged appends");
    await server.kill();
    stopped = true;
    await Promise.all(runners);
    if (redis !== undefined) {
      // The Redis server dies too: acknowledged means fsynced (appendfsync always).
      await redis.kill();
      await redis.restart();
    }
    server = await startServer(["event-log", "--store", store]);
    const client = grpcClient(EventLogService, server.address);

    const logs = new Map<string, Array<{ client: number; seq: number; cursor: string }>>();
    for (const id of new Set(Array.from({ length: CLIENTS }, (_, c) => sessionOf(c)))) {
      const records = await readAfterAll(client, { sessionId: id });
      expect(records.map((r) => Number(decodeEnvelope(r.cursor).p))).toEqual(records.map((_, i) => i + 1));
      logs.set(
        id,
        records.map((r) => ({ ...(body(r.event?.payload) as { client: number; seq: number }), cursor: r.cursor })),
      );
    }
    for (let c = 0; c < CLIENTS; c++) {
      const log = logs.get(sessionOf(c))!;
      const mine = log.filter((r) => r.client === c).map((r) => r.seq);
      // Present once, in order; at most the one append in flight at the kill may also have landed.
      expect(mine).toEqual(Array.from({ length: mine.length }, (_, i) => i));
      expect(mine.length - acked[c]!.length).toBeGreaterThanOrEqual(0);
      expect(mine.length - acked[c]!.length).toBeLessThanOrEqual(1);
      for (const { seq, cursor } of [acked[c]![0]!, acked[c]![acked[c]!.length >> 1]!, acked[c]!.at(-1)!]) {
        const p = Number(decodeEnvelope(cursor).p);
        expect(log[p - 1]).toMatchObject({ client: c, seq, cursor });
        const after = await readAfterAll(client, { sessionId: sessionOf(c), cursor });
        expect(after.map((r) => r.cursor)).toEqual(log.slice(p).map((r) => r.cursor));
      }
    }
    // The log goes on after the restart in the same generation.
    const tail = logs.get("crash-0")!;
    const { cursor } = await client.append({ sessionId: "crash-0", event: ev({ client: 0, seq: -1 }) });
    expect(decodeEnvelope(cursor)).toMatchObject({ g: decodeEnvelope(tail[0]!.cursor).g, p: String(tail.length + 1) });
  });
});

describe("EventLogService follow across a Redis restart", () => {
  let redis: SpawnedRedis | undefined;
  let server: ServerProcess | undefined;
  afterAll(async () => {
    await server?.stop();
    await redis?.stop();
  });

  test("a parked follower keeps its stream through a Redis restart and receives the next append", async () => {
    redis = await spawnRedis();
    server = await startServer(["event-log", "--store", redis.url, ...METRICS_FLAGS]);
    const client = grpcClient(EventLogService, server.address);
    const [cursor] = await appendSeqs(client, "restart", [0]);
    const { stream, outcome } = await parkedFollow(client, server!, "restart", cursor);
    await redis.kill();
    await redis.restart();
    // Appends fail until the server's connection is back; then the first one that succeeds must reach the follower.
    let appended: string | undefined;
    await waitFor(
      async () => {
        appended = await client.append({ sessionId: "restart", event: ev({ seq: 1 }) }).then(
          (r) => r.cursor,
          () => undefined,
        );
        return appended !== undefined;
      },
      30_000,
      "an append to succeed after the Redis restart",
    );
    const got = await outcome;
    expect(got.cursor).toBe(appended);
    expect(got.live).toBe(true);
    await stream.cancel();
  });
});
