import { afterAll, beforeAll, describe, expect, test, vi } from "vitest";
import { Code, type Client } from "@connectrpc/connect";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { ScheduleStoreService } from "../../gen/mecatl/driver/v1/schedule_store_pb.js";
import type { TestBackend } from "../helpers/backends.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { grpcClient, harnessClient, HARNESS_MESSAGE_BYTES } from "../helpers/clients.js";
import { expectCode } from "../helpers/errors.js";
import { inParallel, seedSessions } from "../helpers/seed.js";
import { fireRecord, iso, readFire, readSchedule, scheduleRecord, T0, ts, type SpecInit, type State } from "../helpers/schedules.js";

// Each test moves 64+ MiB through the server and Redis: a quiet machine takes 5-30 s, a loaded one several times that.
vi.setConfig({ testTimeout: 240_000 });

/** The longest id the driver accepts, in bytes (services/rpc/validate.ts MAX_ID_BYTES). */
const MAX_ID_BYTES = 16 * 1024;

const utf8 = new TextEncoder();
const snap = (text: string) => ({ format: "sessnap-json/1", payload: utf8.encode(text) });

/** Size of the text in each large schedule or fire record: three pass 64 MiB, two fit. */
const BIG_TEXT_BYTES = 22.5 * 1024 * 1024;

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
 * the limit, and the server goes on answering. Defined once and run by
 * answer-limits-sqlite.test.ts and answer-limits-redis.test.ts, so that the
 * two halves (minutes each: every test moves 64+ MiB) run in parallel.
 */
export function answerLimitsSuite(backends: TestBackend[]): void {
  describe.each(backends)("answers bounded by the 64 MiB message limit on $name", (backend: TestBackend) => {
    let server: ServerProcess;
    let sessions: Client<typeof SessionStoreService>;
    let harnessSessions: Client<typeof SessionStoreService>;
    let schedules: Client<typeof ScheduleStoreService>;
    let harnessSchedules: Client<typeof ScheduleStoreService>;
    let store: string;

    beforeAll(async () => {
      ({ store } = await backend.setup());
      server = await startServer(["session-store", "schedule-store", "--store", store, "--store-timeout", "30s"]); // 20 MiB records on a loaded machine
      sessions = grpcClient(SessionStoreService, server.address);
      harnessSessions = harnessClient(SessionStoreService, server.address);
      schedules = grpcClient(ScheduleStoreService, server.address);
      harnessSchedules = harnessClient(ScheduleStoreService, server.address);
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

    const save = (spec: SpecInit, st: Partial<State> = {}) => schedules.saveSchedule({ name: spec.Name, schedule: scheduleRecord(spec, st) });
    type WireRecord = { format: string; payload: Uint8Array };
    const names = (records: WireRecord[]) => records.map((r) => String(readSchedule(r).spec.Name));
    /** True when two records are byte for byte the same (vitest's deep equality walks a typed array key by key: slow, and protobuf messages carry a `$typeName`). */
    const sameRecord = (a: WireRecord | undefined, b: WireRecord | undefined) => a?.format === b?.format && a !== undefined && b !== undefined && Buffer.from(a.payload).equals(b.payload);
    /** Expects each answer to hold the schedules of `expected[i]`, each once, byte for byte as LoadSchedule returns it. */
    const expectSchedulesAsLoaded = async (answers: WireRecord[][], expected: string[][]) => {
      const loaded = new Map<string, WireRecord>();
      await inParallel([...new Set(expected.flat())], 16, async (name) => loaded.set(name, (await schedules.loadSchedule({ name })).schedule!));
      answers.forEach((records, i) => {
        expect([...names(records)].sort()).toEqual([...expected[i]!].sort());
        expect(records.filter((r) => !sameRecord(r, loaded.get(String(readSchedule(r).spec.Name))))).toEqual([]);
      });
    };

    describe("ListSchedules and DueSchedules (wire-contract.md section 5.5)", () => {
      const ids = Array.from({ length: 440 }, (_, i) => `page-${String(i).padStart(4, "0")}`);
      /** Three schedules in eight are not due at T0: a later fire, disabled, or out of fires. */
      const kind = (i: number) => ["due", "due", "due", "later", "due", "disabled", "due", "spent"][i % 8]!;
      const dueIds = ids.filter((_, i) => kind(i) === "due");

      test("answers over several pages hold every schedule once, as LoadSchedule returns it", async () => {
        await inParallel(ids, 32, (name) => {
          const i = ids.indexOf(name);
          const k = kind(i);
          const st: Partial<State> = { NextFireAt: iso(k === "later" ? T0 + 100_000 : T0 - i), Enabled: k !== "disabled", FireCount: k === "spent" ? 2 : 0 };
          return save({ Name: name, MaxFires: k === "spent" ? 2 : 0, PlacementOwned: i % 5 === 0, Prompt: `schedule ${i} ${"é".repeat(i % 50)}` }, st);
        });
        await expectSchedulesAsLoaded([(await schedules.listSchedules({})).schedules, (await schedules.dueSchedules({ now: ts(T0) })).schedules], [ids, dueIds]);
      });

      test("schedules claimed while DueSchedules pages through the index, still due after, are each listed once", async () => {
        // A claim whose next fire is still due at T0 + 1000 moves the schedule further along the time-ordered index.
        let listing = true;
        const claims = (async () => {
          for (let i = 0, pass = 0; listing; i = (i + 1) % dueIds.length) {
            if (i === 0) pass = Math.min(pass + 1, 998);
            await schedules.claimSchedule({ name: dueIds[i]!, now: ts(T0 + 999), nextFire: ts(T0 + pass) });
          }
        })();
        const answers = [];
        for (let round = 0; round < 3; round++) answers.push(names((await schedules.dueSchedules({ now: ts(T0 + 1000) })).schedules));
        listing = false;
        await claims;
        for (const listed of answers) {
          expect(listed.length).toBe(new Set(listed).size);
          expect([...listed].sort()).toEqual(dueIds);
        }
      });

      test("answers past 64 MiB are RESOURCE_EXHAUSTED naming the count and the limit; the server goes on; one less fits the harness", async () => {
        const big = ["big-a", "big-b", "big-c"];
        for (const name of big) await save({ Name: name, Prompt: "p".repeat(BIG_TEXT_BYTES) }, { NextFireAt: iso(T0 - 1), Enabled: true });
        const all = [...ids, ...big];
        const list = await expectCode(schedules.listSchedules({}), Code.ResourceExhausted, `${HARNESS_MESSAGE_BYTES}-byte message limit`);
        expect(list.rawMessage).toContain(`the store holds ${all.length} schedules`);
        expect(list.rawMessage).toMatch(/: \d+ schedules \(\d+ bytes\) were read before/);
        const due = await expectCode(schedules.dueSchedules({ now: ts(T0 + 1000) }), Code.ResourceExhausted, `${HARNESS_MESSAGE_BYTES}-byte message limit`);
        expect(due.rawMessage).toMatch(/: \d+ due schedules \(\d+ bytes\) were read before/);
        // Other calls are answered and nothing changed; one schedule less fits the harness.
        expect(readSchedule((await schedules.loadSchedule({ name: "big-b" })).schedule).spec.Prompt).toHaveLength(BIG_TEXT_BYTES);
        await schedules.deleteSchedule({ name: "big-c" });
        const fits = (await harnessSchedules.listSchedules({})).schedules;
        expect([...names(fits)].sort()).toEqual(all.slice(0, -1).sort());
        expect(fits.filter((r) => r.payload.byteLength > BIG_TEXT_BYTES).length).toBe(2);
        await inParallel(all, 32, (name) => schedules.deleteSchedule({ name }));
      });
    });

    describe("ListFires (wire-contract.md section 5.5)", () => {
      /** A fire record, in flight (no Stop), so a later RecordFire may move it to another schedule. */
      const fire = (id: string, scheduleName: string, err = "") => fireRecord({ ID: id, ScheduleName: scheduleName, SessionID: `sess-${id}`, FiredAt: iso(T0), Err: err });

      test("an answer over several pages holds every fire of the schedule once, byte for byte as recorded", async () => {
        await save({ Name: "fires-many" }, { NextFireAt: iso(T0), Enabled: true });
        await save({ Name: "fires-other" }, { NextFireAt: iso(T0), Enabled: true });
        const fireIds = Array.from({ length: 300 }, (_, i) => `fire-${String(i).padStart(4, "0")}`);
        // Few at once: every RecordFire also writes its schedule, so on Redis they race for one version.
        await inParallel(fireIds, 4, (id) => schedules.recordFire({ fireId: id, fire: fire(id, "fires-many", "x".repeat(fireIds.indexOf(id))) }));
        await schedules.recordFire({ fireId: "fire-other", fire: fire("fire-other", "fires-other") });
        const listed = (await schedules.listFires({ scheduleName: "fires-many" })).fires;
        expect(listed.map((f) => readFire(f).ID).sort()).toEqual(fireIds);
        expect(listed.filter((f) => !sameRecord(f, fire(readFire(f).ID, "fires-many", "x".repeat(fireIds.indexOf(readFire(f).ID)))))).toEqual([]);
      });

      test("an answer past 64 MiB is RESOURCE_EXHAUSTED naming the count and the limit; the server goes on; one less fits the harness", async () => {
        await save({ Name: "fires-big" }, { NextFireAt: iso(T0), Enabled: true });
        const big = ["big-fire-a", "big-fire-b", "big-fire-c"];
        for (const id of big) await schedules.recordFire({ fireId: id, fire: fire(id, "fires-big", "e".repeat(BIG_TEXT_BYTES)) });
        await schedules.recordFire({ fireId: "small-fire", fire: fire("small-fire", "fires-big") });
        const err = await expectCode(schedules.listFires({ scheduleName: "fires-big" }), Code.ResourceExhausted, `${HARNESS_MESSAGE_BYTES}-byte message limit`);
        expect(err.rawMessage).toContain("the store holds 4 fires");
        expect(err.rawMessage).toMatch(/: \d+ fires \(\d+ bytes\) were read before/);
        expect(readFire((await schedules.loadFire({ fireId: "big-fire-a" })).fire).Err).toHaveLength(BIG_TEXT_BYTES);
        // Moving one big record to another schedule makes the answer fit.
        await schedules.recordFire({ fireId: "big-fire-c", fire: fire("big-fire-c", "fires-many") });
        const listed = (await harnessSchedules.listFires({ scheduleName: "fires-big" })).fires.map((f) => readFire(f).ID);
        expect(listed.sort()).toEqual(["big-fire-a", "big-fire-b", "small-fire"]);
      });
    });
  });
}
