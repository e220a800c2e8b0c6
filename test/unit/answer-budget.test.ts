import { describe, expect, test } from "vitest";
import { create, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { ListSchedulesResponseSchema, ScheduleRecordSchema } from "../../gen/mecatl/driver/v1/schedule_store_pb.js";
import { ListSessionsResponseSchema, StoredSessionEntrySchema } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { collectAnswer, recordBytes } from "../../services/rpc/answer-budget.js";
import { storedSessionEntryBytes } from "../../services/session-store/service.js";
import { batchesBySize, distinctBy, SCAN_PAGE_BYTES, SCAN_PAGE_ENTRIES, takePage } from "../../services/storage/index-scan.js";
import { microsToTimestamp, nanosToTimestamp } from "../../services/rpc/timestamp.js";
import { TimestampSchema } from "@bufbuild/protobuf/wkt";

async function* from<T>(xs: readonly T[]): AsyncGenerator<T> {
  yield* xs;
}

async function drain<T>(xs: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of xs) out.push(x);
  return out;
}

const utf8 = new TextEncoder();

/** Records of every size class a length prefix has (1, 2 and 3 varint bytes), empty format included. */
const records = [
  { format: "schedule-json/1", payload: utf8.encode("{}") },
  { format: "schedule-json/2-owned-placement", payload: new Uint8Array(200) },
  { format: "", payload: new Uint8Array(20_000) },
  { format: "é".repeat(100), payload: new Uint8Array(0) },
].map((r) => create(ScheduleRecordSchema, r));

const sessions = [
  { sessionId: "a", modifiedAt: microsToTimestamp(1_700_000_000_123_456) },
  { sessionId: "x".repeat(16 * 1024), modifiedAt: microsToTimestamp(1_000_000) },
  { sessionId: "é", modifiedAt: microsToTimestamp(-1) },
  { sessionId: "zero-time", modifiedAt: microsToTimestamp(0) },
  { sessionId: "max", modifiedAt: create(TimestampSchema, { seconds: 2n ** 63n - 1n, nanos: 999_999_999 }) },
  { sessionId: "no-time" },
].map((s) => create(StoredSessionEntrySchema, s));

describe("answer budget (issue 10)", () => {
  test("entry sizes plus their prefixes add up to the encoded answer, byte for byte", async () => {
    for (const r of records) expect(recordBytes(r)).toBe(toBinary(ScheduleRecordSchema, r).byteLength);
    for (const s of sessions) expect(storedSessionEntryBytes(s), s.sessionId).toBe(toBinary(StoredSessionEntrySchema, s).byteLength);
    for (const us of [0, -1, 1, 999_999, -1_000_001, 1_700_000_000_123_456, 2 ** 60]) expect(microsToTimestamp(us), String(us)).toEqual(nanosToTimestamp(BigInt(us) * 1000n));
    const scheduleAnswer = toBinary(ListSchedulesResponseSchema, create(ListSchedulesResponseSchema, { schedules: records })).byteLength;
    const sessionAnswer = toBinary(ListSessionsResponseSchema, create(ListSessionsResponseSchema, { sessions })).byteLength;
    // An answer of exactly the limit is accepted; one byte less of limit refuses it.
    expect(await collectAnswer(from(records), recordBytes, { rpc: "ListSchedules", noun: "schedules" }, undefined, scheduleAnswer)).toEqual(records);
    const sizeOf = storedSessionEntryBytes;
    expect(await collectAnswer(from(sessions), sizeOf, { rpc: "List", noun: "sessions" }, undefined, sessionAnswer)).toEqual(sessions);
    await expect(collectAnswer(from(records), recordBytes, { rpc: "ListSchedules", noun: "schedules" }, undefined, scheduleAnswer - 1)).rejects.toMatchObject({ code: Code.ResourceExhausted });
    await expect(collectAnswer(from(sessions), sizeOf, { rpc: "List", noun: "sessions" }, undefined, sessionAnswer - 1)).rejects.toMatchObject({ code: Code.ResourceExhausted });
  });

  test("a refusal stops reading at the entry that does not fit and names the count read, the store's count and the limit", async () => {
    let read = 0;
    async function* counted() {
      for (let i = 0; i < 1000; i++) {
        read++;
        yield records[0]!;
      }
    }
    const one = recordBytes(records[0]!) + 1 + 1;
    const err = await collectAnswer(counted(), recordBytes, { rpc: "ListSchedules", noun: "schedules", total: async () => 1000 }, undefined, one * 10 + 1).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).rawMessage).toBe(
      `ListSchedules: the answer does not fit the ${one * 10 + 1}-byte message limit: 10 schedules (${one * 10} bytes) were read before the next one (${one} bytes) would exceed it; the store holds 1000 schedules; nothing is returned`,
    );
    expect(read).toBe(11);
    // A store that cannot count does not hide the refusal.
    const noCount = await collectAnswer(from(records), recordBytes, { rpc: "ListSchedules", noun: "schedules", total: () => Promise.reject(new Error("down")) }, undefined, 10).catch((e: unknown) => e);
    expect((noCount as ConnectError).code).toBe(Code.ResourceExhausted);
    expect((noCount as ConnectError).rawMessage).not.toContain("the store holds");
  });

  test("an aborted call stops reading with CANCELLED", async () => {
    const abort = new AbortController();
    abort.abort();
    await expect(collectAnswer(from(records), recordBytes, { rpc: "ListSchedules", noun: "schedules" }, abort.signal)).rejects.toMatchObject({ code: Code.Canceled });
  });
});

describe("index scans (issue 10)", () => {
  const row = (key: number, bytes = 1) => ({ key, bytes });
  const page = (rows: Array<{ key: number; bytes: number }>) => takePage(rows, (r) => r.key, (r) => r.bytes, (r) => r.key);

  test("a page ends at the entry count or the byte budget, with a next key only when it is full", () => {
    const full = Array.from({ length: SCAN_PAGE_ENTRIES }, (_, i) => row(i));
    expect(page(full)).toEqual({ entries: full.map((r) => r.key), next: SCAN_PAGE_ENTRIES - 1 });
    expect(page(full.slice(1))).toEqual({ entries: full.slice(1).map((r) => r.key), next: undefined });
    expect(page([row(1, SCAN_PAGE_BYTES / 2), row(2, SCAN_PAGE_BYTES / 2), row(3)])).toEqual({ entries: [1, 2], next: 2 });
    expect(page([row(7, 64 * SCAN_PAGE_BYTES), row(8)])).toEqual({ entries: [7], next: 7 });
    expect(page([])).toEqual({ entries: [], next: undefined });
  });

  test("records are loaded in batches of about the page byte budget, at least one each, in order", () => {
    const half = SCAN_PAGE_BYTES / 2;
    expect(batchesBySize(["a", "b", "c", "d", "e"], [half, half, 1, 64 * SCAN_PAGE_BYTES, 1])).toEqual([["a", "b"], ["c"], ["d"], ["e"]]);
    expect(batchesBySize([], [])).toEqual([]);
  });

  test("repeats are dropped by key, long keys included, first sighting kept", async () => {
    const long = (c: string) => c.repeat(16 * 1024);
    const entries = [
      { k: "a", v: 1 },
      { k: long("x"), v: 2 },
      { k: "a", v: 3 },
      { k: long("y"), v: 4 },
      { k: long("x"), v: 5 },
      { k: "b", v: 6 },
    ];
    expect((await drain(distinctBy(from(entries), (e) => e.k))).map((e) => e.v)).toEqual([1, 2, 4, 6]);
  });
});
