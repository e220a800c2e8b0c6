import { afterEach, describe, expect, test } from "vitest";
import Database from "better-sqlite3";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { EventLogService } from "../../gen/mecatl/driver/v1/event_log_pb.js";
import { ScheduleStoreService } from "../../gen/mecatl/driver/v1/schedule_store_pb.js";
import { MAIN, startServer } from "../helpers/server.js";
import { grpcClient } from "../helpers/clients.js";
import { EVENT_FORMAT, readAfterAll } from "../helpers/event-log.js";
import { fireRecord, iso, readFire, readSchedule, scheduleRecord, T0 } from "../helpers/schedules.js";

/**
 * Reads off the SQLite writer (issue 11): point reads run on the main
 * thread's read-only connection, large and paged reads on a reader worker,
 * so that no read waits behind a write; every read still sees every write
 * answered before it (read-your-writes).
 */
const built = (path: string) => pathToFileURL(join(dirname(MAIN), path)).href;
const { sessionStoreOps } = (await import(built("../session-store/sqlite-ops.js"))) as typeof import("../../services/session-store/sqlite-ops.js");
const { eventLogOps } = (await import(built("../event-log/sqlite-ops.js"))) as typeof import("../../services/event-log/sqlite-ops.js");
const { scheduleStoreOps } = (await import(built("../schedule-store/sqlite-ops.js"))) as typeof import("../../services/schedule-store/sqlite-ops.js");
const { NeedsWorker, INLINE_READ_BYTES } = (await import(built("../storage/sqlite-op.js"))) as typeof import("../../services/storage/sqlite-op.js");

const MiB = 1024 * 1024;
const FORMAT = "sessnap-json/1";
const bytes = (n: number, fill: number) => new Uint8Array(n).fill(fill);
/** Asserts byte-for-byte equality (vitest's deep equality walks a Uint8Array element by element: seconds for a few MiB). */
const expectBytes = (actual: Uint8Array | undefined, expected: Uint8Array) => expect(actual !== undefined && Buffer.from(actual).equals(expected)).toBe(true);
/** An event payload of exactly `n` bytes (at least 8): a JSON object holding one string of `fill` letters. */
const eventBytes = (n: number, fill: number) => new TextEncoder().encode(JSON.stringify({ t: String.fromCharCode(97 + (fill % 26)).repeat(n - 8) }));

describe("SQLite reads off the writer", () => {
  const cleanups: Array<() => unknown> = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });
  function tempFile(): string {
    const dir = mkdtempSync(join(tmpdir(), "mecatl-reads-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    return join(dir, "store.sqlite");
  }
  async function serve(path: string, extra: string[] = []) {
    const server = await startServer(["all", "--store", `sqlite:${path}`, ...extra]);
    cleanups.push(() => server.stop());
    return {
      server,
      sessions: grpcClient(SessionStoreService, server.address),
      log: grpcClient(EventLogService, server.address),
      schedules: grpcClient(ScheduleStoreService, server.address),
    };
  }

  test("point reads and large reads answer while a write waits for another process's lock", async () => {
    const path = tempFile();
    // The lock wait outlasts the whole test: the Save below cannot finish until the lock is released.
    const { sessions, log, schedules } = await serve(path, ["--store-timeout", "60s"]);
    await sessions.save({ sessionId: "small", snapshot: { format: FORMAT, payload: bytes(1024, 1) } });
    await sessions.save({ sessionId: "large", snapshot: { format: FORMAT, payload: bytes(3 * MiB, 2) } });
    await log.append({ sessionId: "log", event: { format: EVENT_FORMAT, payload: eventBytes(100, 3) } });
    await log.append({ sessionId: "log", event: { format: EVENT_FORMAT, payload: eventBytes(2 * MiB, 4) } });
    await schedules.saveSchedule({ name: "sched", schedule: scheduleRecord({ Name: "sched" }) });
    await schedules.recordFire({ fireId: "fire", fire: fireRecord({ ID: "fire", ScheduleName: "sched", FiredAt: iso(T0) }) });

    const holder = new Database(path);
    cleanups.push(() => holder.close());
    holder.exec("BEGIN IMMEDIATE");
    let saved = false;
    const save = sessions.save({ sessionId: "small", snapshot: { format: FORMAT, payload: bytes(1024, 9) } }).then(() => (saved = true));

    expectBytes((await sessions.load({ sessionId: "small" })).snapshot!.payload, bytes(1024, 1));
    expectBytes((await sessions.load({ sessionId: "large" })).snapshot!.payload, bytes(3 * MiB, 2));
    const records = await readAfterAll(log, { sessionId: "log", cursor: "" });
    expect(records.map((r) => r.event?.payload.length)).toEqual([100, 2 * MiB]);
    expect(readSchedule((await schedules.loadSchedule({ name: "sched" })).schedule).spec.Name).toBe("sched");
    expect(readFire((await schedules.loadFire({ fireId: "fire" })).fire).ID).toBe("fire");
    expect((await sessions.list({})).sessions.map((s) => s.sessionId).sort()).toEqual(["large", "small"]);
    expect(saved).toBe(false);

    holder.exec("ROLLBACK");
    await save;
    expectBytes((await sessions.load({ sessionId: "small" })).snapshot!.payload, bytes(1024, 9));
  });

  test("every read sees every write answered before it: Load after Save, ReadAfter after Append, LoadSchedule after SaveSchedule", async () => {
    const { sessions, log, schedules } = await serve(tempFile());
    // Eight callers at once, so that reads and group commits overlap; sizes on both sides of the 1 MiB inline limit.
    await Promise.all(
      Array.from({ length: 8 }, async (_, caller) => {
        let cursor = "";
        for (let i = 0; i < 25; i++) {
          const size = i % 10 === 9 ? INLINE_READ_BYTES + 1 : 1 + i * 100;
          const payload = eventBytes(8 + size, caller * 25 + i);
          await sessions.save({ sessionId: `s-${caller}`, snapshot: { format: FORMAT, payload } });
          expectBytes((await sessions.load({ sessionId: `s-${caller}` })).snapshot!.payload, payload);

          const appended = await log.append({ sessionId: `log-${caller}`, event: { format: EVENT_FORMAT, payload } });
          const after = await readAfterAll(log, { sessionId: `log-${caller}`, cursor });
          expect(after.map((r) => r.cursor)).toEqual([appended.cursor]);
          expectBytes(after[0]!.event!.payload, payload);
          cursor = appended.cursor;

          await schedules.saveSchedule({ name: `sched-${caller}`, schedule: scheduleRecord({ Name: `sched-${caller}`, Prompt: `turn ${i}` }) });
          expect(readSchedule((await schedules.loadSchedule({ name: `sched-${caller}` })).schedule).spec.Prompt).toBe(`turn ${i}`);
        }
      }),
    );
  });

  test("an inline read loads no row larger than it may: Load, a ReadAfter page and LoadSchedule hand such rows to the reader worker", async () => {
    const path = tempFile();
    const { sessions, log, schedules } = await serve(path);
    await sessions.save({ sessionId: "large", snapshot: { format: FORMAT, payload: bytes(4096, 1) } });
    await sessions.save({ sessionId: "small", snapshot: { format: FORMAT, payload: bytes(100, 2) } });
    await log.append({ sessionId: "log", event: { format: EVENT_FORMAT, payload: eventBytes(100, 3) } });
    await log.append({ sessionId: "log", event: { format: EVENT_FORMAT, payload: eventBytes(4096, 4) } });
    await schedules.saveSchedule({ name: "sched", schedule: scheduleRecord({ Name: "sched", Prompt: "p".repeat(4096) }) });
    await schedules.recordFire({ fireId: "fire", fire: fireRecord({ ID: "fire", ScheduleName: "sched", FiredAt: iso(T0), Err: "e".repeat(4096) }) });

    const db = new Database(path, { readonly: true });
    cleanups.push(() => db.close());
    const ctx = { notify: () => undefined, readBytes: 1024 };
    expect(() => sessionStoreOps["session.load"].run(db, { sessionId: "large" }, ctx)).toThrow(NeedsWorker);
    expectBytes(sessionStoreOps["session.load"].run(db, { sessionId: "small" }, ctx)?.payload, Buffer.from(bytes(100, 2)));
    expect(sessionStoreOps["session.load"].run(db, { sessionId: "absent" }, ctx)).toBeUndefined();
    // A page ends before a record that does not fit; a page that would start with one goes to the worker.
    const page = eventLogOps["events.read"].run(db, { sessionId: "log", afterPosition: 0, maxRecords: 10 }, ctx);
    expect(page!.records.map((r) => r.position)).toEqual([1]);
    expect(page!.length).toBe(2);
    expect(() => eventLogOps["events.read"].run(db, { sessionId: "log", afterPosition: 1, maxRecords: 10 }, ctx)).toThrow(NeedsWorker);
    expect(() => scheduleStoreOps["schedule.load"].run(db, { name: "sched" }, ctx)).toThrow(NeedsWorker);
    expect(() => scheduleStoreOps["schedule.loadFire"].run(db, { fireId: "fire" }, ctx)).toThrow(NeedsWorker);
    expect(scheduleStoreOps["schedule.load"].run(db, { name: "absent" }, ctx)).toBeUndefined();

    // Through the server, the same rows arrive whole.
    expect((await sessions.load({ sessionId: "large" })).snapshot!.payload.length).toBe(4096);
    expect((await readAfterAll(log, { sessionId: "log", cursor: "" })).length).toBe(2);
    expect(readSchedule((await schedules.loadSchedule({ name: "sched" })).schedule).spec.Prompt).toBe("p".repeat(4096));
  });
});
