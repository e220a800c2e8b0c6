import { beforeAll, describe, expect, test } from "vitest";
import { allBackends, type TestBackend } from "../helpers/backends.js";
import { serveDrivers } from "../helpers/driver-server.js";
import { METRICS_FLAGS } from "../helpers/metrics.js";
import { watchParks } from "../helpers/event-log.js";
import type { DriverClients } from "../../clients/factory.js";
import type { CursorRecord, EventLogClient } from "../../clients/event-log-client.js";
import { CursorExpiredError, CursorMalformedError } from "../../clients/errors.js";
import { InvalidRequestError } from "../../clients/errors.js";

const ev = (n: number, extra: Record<string, unknown> = {}) => JSON.stringify({ type: "test", n, ...extra });
const num = (r: CursorRecord) => (r.kind === "event" ? (JSON.parse(Buffer.from(r.payload).toString("utf8")) as { n: number }).n : `gap:${r.reason}`);

async function collect(it: AsyncIterable<CursorRecord>): Promise<CursorRecord[]> {
  const out: CursorRecord[] = [];
  for await (const r of it) out.push(r);
  return out;
}

async function failure(it: AsyncIterable<unknown>): Promise<unknown> {
  try {
    for await (const _ of it) void _;
  } catch (err) {
    return err;
  }
  return undefined;
}

describe.each(allBackends())("EventLogClient against a real server on $name", (backend: TestBackend) => {
  const served = serveDrivers(backend, ["session-store", "event-log"], [...METRICS_FLAGS]);
  let clients: DriverClients;
  let log: EventLogClient;
  beforeAll(() => {
    clients = served.clients;
    log = clients.eventLog!;
  });

  test("appends return cursors; ReadAfter replays from the empty cursor, in order, with those cursors (3.4, 3.6)", async () => {
    const cursors: string[] = [];
    for (let i = 1; i <= 5; i++) cursors.push(await log.append("el-order", ev(i)));
    expect(cursors.every((c) => c !== "")).toBe(true);
    const records = await collect(log.readAfter("el-order"));
    expect(records.map(num)).toEqual([1, 2, 3, 4, 5]);
    expect(records.map((r) => r.cursor)).toEqual(cursors);
    expect(records.every((r) => r.kind === "event" && !r.live)).toBe(true);
  });

  test("a cursor resumes strictly after its record; the newest yields nothing (3.6)", async () => {
    const cursors: string[] = [];
    for (let i = 1; i <= 4; i++) cursors.push(await log.append("el-resume", ev(i)));
    for (let k = 0; k < 4; k++) expect((await collect(log.readAfter("el-resume", { cursor: cursors[k] }))).map(num)).toEqual([1, 2, 3, 4].slice(k + 1));
  });

  test("limit bounds the records of one call and its last cursor resumes exactly (3.6)", async () => {
    for (let i = 1; i <= 7; i++) await log.append("el-limit", ev(i));
    const seen: unknown[] = [];
    const sizes: number[] = [];
    let cursor: string | undefined;
    for (;;) {
      const page = await collect(log.readAfter("el-limit", { cursor, limit: 3 }));
      if (page.length === 0) break;
      sizes.push(page.length);
      seen.push(...page.map(num));
      cursor = page.at(-1)!.cursor;
    }
    expect(sizes).toEqual([3, 3, 1]);
    expect(seen).toEqual([1, 2, 3, 4, 5, 6, 7]);
  });

  test("gaps occupy positions in ReadAfter and are skipped by Read (3.4, 3.5)", async () => {
    await log.append("el-gap", ev(1));
    const gapCursor = await log.appendGap("el-gap", "relay dropped 3 events");
    await log.append("el-gap", ev(2));
    const records = await collect(log.readAfter("el-gap"));
    expect(records.map(num)).toEqual([1, "gap:relay dropped 3 events", 2]);
    expect(records[1]!.cursor).toBe(gapCursor);
    const legacy: number[] = [];
    for await (const p of log.read("el-gap")) legacy.push(JSON.parse(Buffer.from(p).toString("utf8")).n);
    expect(legacy).toEqual([1, 2]);
  });

  test("an unknown session reads as an empty sequence (3.5, 3.6)", async () => {
    expect(await collect(log.readAfter("el-nobody"))).toEqual([]);
    const legacy: unknown[] = [];
    for await (const p of log.read("el-nobody")) legacy.push(p);
    expect(legacy).toEqual([]);
  });

  test("a follow delivers later appends live and ends cleanly when its signal aborts (3.6)", async () => {
    await log.append("el-follow", ev(1));
    const ac = new AbortController();
    const got: CursorRecord[] = [];
    const parks = await watchParks(served.server);
    const following = (async () => {
      for await (const r of log.readAfter("el-follow", { follow: true, signal: ac.signal })) {
        got.push(r);
        if (got.length === 1) {
          // Record 1 was replayed; the server reports the follower parked at the tail before 2 and 3 are appended.
          await parks.parked("the follower of el-follow");
          for (let i = 2; i <= 3; i++) await log.append("el-follow", ev(i));
        }
        if (got.length === 3) ac.abort();
      }
    })();
    await expect(following).resolves.toBeUndefined();
    expect(got.map(num)).toEqual([1, 2, 3]);
    // Replayed, then appended while parked: live exactly from record 2 on.
    expect(got.map((r) => r.live)).toEqual([false, true, true]);
  });

  test("a follower attached before the first append receives it live (3.6)", async () => {
    const ac = new AbortController();
    const parks = await watchParks(served.server);
    const first = (async () => {
      for await (const r of log.readAfter("el-early", { follow: true, signal: ac.signal })) {
        ac.abort();
        return [num(r), r.live];
      }
    })();
    await parks.parked("the follower of el-early");
    await log.append("el-early", ev(42));
    expect(await first).toEqual([42, true]);
  });

  test("limit ends a follow cleanly (3.6)", async () => {
    for (let i = 1; i <= 3; i++) await log.append("el-follow-limit", ev(i));
    expect((await collect(log.readAfter("el-follow-limit", { follow: true, limit: 2 }))).map(num)).toEqual([1, 2]);
  });

  test("garbage and other sessions' cursors are CursorMalformedError, never coerced (3.6, 3.7)", async () => {
    const cursor = await log.append("el-mine", ev(1));
    for (const bad of ["!!!not-base64!!!", Buffer.from("hello").toString("base64url")]) {
      expect(await failure(log.readAfter("el-mine", { cursor: bad }))).toBeInstanceOf(CursorMalformedError);
    }
    const err = await failure(log.readAfter("el-other", { cursor }));
    expect(err).toBeInstanceOf(CursorMalformedError);
    expect((err as CursorMalformedError).sessionId).toBe("el-other");
  });

  test("deleting the session expires its cursors, even for a parked follower (3.6, docs/DESIGN.md event log)", async () => {
    const cursor = await log.append("el-reset", ev(1));
    const ac = new AbortController();
    const parks = await watchParks(served.server);
    const parked = failure(log.readAfter("el-reset", { cursor, follow: true, signal: ac.signal }));
    await parks.parked("the follower of el-reset");
    await clients.sessionStore!.delete("el-reset");
    try {
      expect(await parked).toBeInstanceOf(CursorExpiredError);
    } finally {
      ac.abort();
    }
    await log.append("el-reset", ev(2));
    expect(await failure(log.readAfter("el-reset", { cursor }))).toBeInstanceOf(CursorExpiredError);
    expect((await collect(log.readAfter("el-reset"))).map(num)).toEqual([2]);
  });

  test("a payload that is not JSON, a blank id or a negative limit never reach the wire", async () => {
    await expect(log.append("el-bad", "{not json")).rejects.toBeInstanceOf(InvalidRequestError);
    await expect(log.append("", ev(1))).rejects.toBeInstanceOf(InvalidRequestError);
    expect(() => log.readAfter("el-bad", { limit: -1 })).toThrow(InvalidRequestError);
  });

  test("events of 64 KiB and a 5 MiB log cross the wire in order (8.9)", async () => {
    const big = "x".repeat(64 * 1024 - 100);
    for (let i = 1; i <= 80; i++) await log.append("el-big", ev(i, { big }));
    const records = await collect(log.readAfter("el-big"));
    expect(records.map(num)).toEqual(Array.from({ length: 80 }, (_, i) => i + 1));
  });
});
