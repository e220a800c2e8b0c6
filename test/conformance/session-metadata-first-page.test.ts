/**
 * A first PageMetadata page (no cursor) is never ABORTED
 * (spec/session-metadata.md, paging: only a request with a cursor restarts),
 * however fast writes change the scope.
 *
 * On Redis a page is read in two steps (members, then their rows; see
 * services/session-store/redis-metadata.ts), and a write between them sends
 * the page round again. Here a raw client floods every partition's scope
 * generation with HINCRBY, pipelined, so every page's two reads are overtaken:
 * the first page must still be answered, with every row as stored. SQLite
 * reads a page in one transaction; the racing-writer suite
 * (session-metadata-race.test.ts) covers it and Redis under real writes.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Code, type Client } from "@connectrpc/connect";
import type { Cluster, Redis } from "ioredis";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { conformanceBackends, DEFAULT_KEYS, rawRedis, type TestBackend } from "../helpers/backends.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { grpcClient } from "../helpers/clients.js";
import { sessnap } from "../helpers/sessnap.js";

const IDS = ["first-a", "first-b", "first-c", "first-d", "first-e"];

/**
 * Bumps `gen:all` of the partitions holding `ids` until stopped, keeping a
 * pipeline of `batch` bumps in flight per partition so that Redis nearly
 * always holds a queued bump. `stop` resolves with the number of bumps made.
 */
function flood(redis: Redis | Cluster, ids: string[], batch = 20): { stop(): Promise<number> } {
  let running = true;
  let bumps = 0;
  const partitions = new Set(ids.map((id) => DEFAULT_KEYS.layout.partitionOf(id)));
  const lanes = [...partitions].map(async (p) => {
    const key = `${DEFAULT_KEYS.sessionMetaPartition(p)}scopes`;
    while (running) {
      const pipeline = redis.pipeline();
      for (let i = 0; i < batch; i++) pipeline.hincrby(key, "gen:all", 1);
      await pipeline.exec();
      bumps += batch;
    }
  });
  return {
    async stop() {
      running = false;
      await Promise.all(lanes);
      return bumps;
    },
  };
}

describe.each(conformanceBackends().filter((b) => b.name.startsWith("redis")))("a first metadata page under a flood of generation bumps on $name", (backend: TestBackend) => {
  let server: ServerProcess;
  let client: Client<typeof SessionStoreService>;
  let raw: Redis | Cluster;
  beforeAll(async () => {
    const setup = await backend.setup();
    raw = rawRedis(setup)!;
    server = await startServer(["session-store", "--store", setup.store]);
    client = grpcClient(SessionStoreService, server.address);
    for (const id of IDS) await client.save({ sessionId: id, snapshot: { format: "sessnap-json/1", payload: sessnap({ id, title: `title of ${id}` }) } });
  });
  afterAll(async () => {
    raw?.disconnect();
    await server?.stop();
    await backend.teardown();
  });

  test("is answered every time, with its rows as stored, while a later page is ABORTED", async () => {
    const quiet = await client.pageMetadata({ limit: 3 });
    expect(quiet.sessions.map((s) => s.sessionId)).toEqual([...IDS].reverse().slice(0, 3));
    const writes = flood(raw, IDS);
    try {
      for (let i = 0; i < 20; i++) {
        const page = await client.pageMetadata({ limit: 3 });
        expect(page.sessions.map((s) => [s.sessionId, s.title])).toEqual(quiet.sessions.map((s) => [s.sessionId, s.title]));
        expect(page.totalCount).toBe(IDS.length);
        expect(page.nextCursor).toBeDefined();
      }
      // The flood does overtake pages: a cursor minted before it is stale.
      await expect(client.pageMetadata({ limit: 3, cursor: quiet.nextCursor })).rejects.toMatchObject({ code: Code.Aborted });
    } finally {
      expect(await writes.stop()).toBeGreaterThan(0);
    }
  });
});
