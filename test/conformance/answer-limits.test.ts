import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Code, type Client } from "@connectrpc/connect";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { allBackends, type TestBackend } from "../helpers/backends.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { grpcClient, harnessClient, HARNESS_MESSAGE_BYTES } from "../helpers/clients.js";
import { expectCode } from "../helpers/errors.js";
import { inParallel, seedSessions } from "../helpers/seed.js";

/** The longest id the driver accepts, in bytes (services/rpc/validate.ts MAX_ID_BYTES). */
const MAX_ID_BYTES = 16 * 1024;

const utf8 = new TextEncoder();
const snap = (text: string) => ({ format: "sessnap-json/1", payload: utf8.encode(text) });

/** `n` distinct ids of exactly `bytes` UTF-8 bytes, starting with `prefix`. */
function longIds(prefix: string, n: number, bytes = MAX_ID_BYTES): string[] {
  return Array.from({ length: n }, (_, i) => {
    const tail = `-${i}`;
    return prefix + "x".repeat(bytes - prefix.length - tail.length) + tail;
  });
}

/**
 * Bounded answers (issue 10): List, ListSchedules, DueSchedules and ListFires
 * read their index in pages and account for the encoded answer as they go.
 * An answer that fits is complete, each entry once; one that would exceed the
 * harness's 64 MiB message limit is RESOURCE_EXHAUSTED naming the count and
 * the limit, and the server goes on answering.
 */
describe.each(allBackends())("answers bounded by the 64 MiB message limit on $name", (backend: TestBackend) => {
  let server: ServerProcess;
  let sessions: Client<typeof SessionStoreService>;
  let harnessSessions: Client<typeof SessionStoreService>;
  let store: string;

  beforeAll(async () => {
    ({ store } = await backend.setup());
    server = await startServer(["session-store", "--store", store]);
    sessions = grpcClient(SessionStoreService, server.address);
    harnessSessions = harnessClient(SessionStoreService, server.address);
  });
  afterAll(async () => {
    await server?.stop();
    await backend.teardown();
  });

  const listIds = async (client = sessions) => (await client.list({})).sessions.map((s) => s.sessionId);

  describe("List (wire-contract.md section 2.5)", () => {
    test("an answer over several pages lists every id once with its save time, the same on every read", async () => {
      const ids = Array.from({ length: 300 }, (_, i) => `page-${String(i).padStart(4, "0")}-${i % 3 === 0 ? "é" : "e"}`);
      await inParallel(ids, 32, (id) => sessions.save({ sessionId: id, snapshot: snap(id) }));
      const deleted = ids.filter((_, i) => i % 7 === 0);
      await inParallel(deleted, 32, (id) => sessions.delete({ sessionId: id }));
      const first = (await sessions.list({})).sessions;
      const kept = ids.filter((_, i) => i % 7 !== 0);
      expect(first.map((s) => s.sessionId).sort()).toEqual([...kept].sort());
      for (const s of first) expect(s.modifiedAt?.seconds, s.sessionId).toBeGreaterThan(0n);
      const second = (await sessions.list({})).sessions;
      const byId = (xs: typeof first) => new Map(xs.map((s) => [s.sessionId, s.modifiedAt]));
      expect(byId(second)).toEqual(byId(first));
      await inParallel(kept, 32, (id) => sessions.delete({ sessionId: id }));
    });

    test("ids re-saved while List pages through the index are each listed once", async () => {
      const ids = Array.from({ length: 600 }, (_, i) => `moving-${String(i).padStart(4, "0")}`);
      await inParallel(ids, 32, (id) => sessions.save({ sessionId: id, snapshot: snap(id) }));
      // Re-save from the front while List reads: each re-save moves an id to the end of a time-ordered index.
      let listing = true;
      const resaves = (async () => {
        for (let i = 0; listing; i = (i + 1) % ids.length) await sessions.save({ sessionId: ids[i]!, snapshot: snap("again") });
      })();
      const lists = [];
      for (let round = 0; round < 3; round++) lists.push(await listIds());
      listing = false;
      await resaves;
      for (const listed of lists) {
        expect(listed.length).toBe(new Set(listed).size);
        expect([...listed].sort()).toEqual(ids);
      }
      await inParallel(ids, 32, (id) => sessions.delete({ sessionId: id }));
    });

    // Last of the List tests: it leaves its 4,079 sessions behind.
    test("an answer past 64 MiB is RESOURCE_EXHAUSTED naming the count and the limit; the server goes on; a few less fit the harness", async () => {
      // Each entry is about 16,405 bytes: 4,091 of them pass 64 MiB.
      const ids = longIds("big-", 4100);
      await seedSessions(store, sessions, ids);
      const err = await expectCode(sessions.list({}), Code.ResourceExhausted, `${HARNESS_MESSAGE_BYTES}-byte message limit`);
      expect(err.rawMessage).toContain("the store holds 4100 sessions");
      expect(err.rawMessage).toMatch(/: 409\d sessions \(\d+ bytes\) were read before/);
      // Other calls are answered, and the refusal changed nothing.
      expect((await sessions.load({ sessionId: ids[0]! })).snapshot?.format).toBe("sessnap-json/1");
      await sessions.save({ sessionId: "after-refusal", snapshot: snap("{}") });
      await inParallel([...ids.slice(0, 21), "after-refusal"], 8, (id) => sessions.delete({ sessionId: id }));
      const listed = await listIds(harnessSessions);
      // Compared by their distinct tails: V8 hashes a string past 16,383 characters by its length alone, so a Set of these ids is a linear search.
      const tail = (id: string) => `${id.length}:${id.slice(-6)}`;
      expect(listed.map(tail).sort()).toEqual(ids.slice(21).map(tail).sort());
    });
  });
});
