import { describe, expect, test } from "vitest";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { ListSchedulesResponseSchema, ScheduleRecordSchema } from "../../gen/mecatl/driver/v1/schedule_store_pb.js";
import { ListSessionsResponseSchema, StoredSessionEntrySchema } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { encodeAnswer, type AnswerSubject } from "../../services/rpc/answer-budget.js";
import { preEncoded } from "../../services/rpc/encoded-answer.js";
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
  const scheduleSubject = { rpc: "ListSchedules", noun: "schedules" };
  const listSchedules = (entries: AsyncIterable<(typeof records)[number]>, limit?: number, subject: AnswerSubject = scheduleSubject, signal?: AbortSignal) =>
    encodeAnswer(ListSchedulesResponseSchema, ScheduleRecordSchema, entries, subject, signal, limit);

  test("the answer is the bytes protobuf-es encodes from the same entries, on either path, and decodes to them; an answer of exactly the limit is accepted", async () => {
    const scheduleBytes = toBinary(ListSchedulesResponseSchema, create(ListSchedulesResponseSchema, { schedules: records }));
    const sessionBytes = toBinary(ListSessionsResponseSchema, create(ListSessionsResponseSchema, { sessions }));
    const schedules = await listSchedules(from(records), scheduleBytes.byteLength);
    const listed = await encodeAnswer(ListSessionsResponseSchema, StoredSessionEntrySchema, from(sessions), { rpc: "List", noun: "sessions" }, undefined, sessionBytes.byteLength);
    // The Connect listener encodes the message; the gRPC adapter sends its wire bytes as they are.
    expect(Buffer.from(toBinary(ListSchedulesResponseSchema, schedules)).equals(scheduleBytes)).toBe(true);
    expect(preEncoded(schedules)?.equals(scheduleBytes)).toBe(true);
    expect(Buffer.from(toBinary(ListSessionsResponseSchema, listed)).equals(sessionBytes)).toBe(true);
    expect(preEncoded(listed)?.equals(sessionBytes)).toBe(true);
    expect(fromBinary(ListSessionsResponseSchema, preEncoded(listed)!).sessions).toEqual(sessions);
    // Init shapes encode as their messages do.
    const inits = await listSchedules(from(records.map((r) => ({ format: r.format, payload: r.payload }))));
    expect(preEncoded(inits)?.equals(scheduleBytes)).toBe(true);
    // No entries: an empty answer.
    const empty = await listSchedules(from([]));
    expect(toBinary(ListSchedulesResponseSchema, empty).byteLength).toBe(0);
    // One byte less of limit refuses either answer.
    await expect(listSchedules(from(records), scheduleBytes.byteLength - 1)).rejects.toMatchObject({ code: Code.ResourceExhausted });
    await expect(encodeAnswer(ListSessionsResponseSchema, StoredSessionEntrySchema, from(sessions), { rpc: "List", noun: "sessions" }, undefined, sessionBytes.byteLength - 1)).rejects.toMatchObject({
      code: Code.ResourceExhausted,
    });
    for (const us of [0, -1, 1, 999_999, -1_000_001, 1_700_000_000_123_456, 2 ** 60]) expect(microsToTimestamp(us), String(us)).toEqual(nanosToTimestamp(BigInt(us) * 1000n));
  });

  test("an answer of many chunks, and entries larger than a chunk, come out whole and in order", async () => {
    const many = Array.from({ length: 40_000 }, (_, i) => create(StoredSessionEntrySchema, { sessionId: `session-${i}-${"é".repeat(i % 7)}`, modifiedAt: microsToTimestamp(i * 1_000_003) }));
    const big = [records[0]!, create(ScheduleRecordSchema, { format: "schedule-json/1", payload: Buffer.alloc(3 * 1024 * 1024 + 17, 7) }), records[1]!];
    const listed = await encodeAnswer(ListSessionsResponseSchema, StoredSessionEntrySchema, from(many), { rpc: "List", noun: "sessions" });
    expect(preEncoded(listed)?.equals(toBinary(ListSessionsResponseSchema, create(ListSessionsResponseSchema, { sessions: many })))).toBe(true);
    expect(preEncoded(await listSchedules(from(big)))?.equals(toBinary(ListSchedulesResponseSchema, create(ListSchedulesResponseSchema, { schedules: big })))).toBe(true);
  });

  test("a refusal stops reading at the entry that does not fit and names the count read, the store's count and the limit", async () => {
    let read = 0;
    async function* counted() {
      for (let i = 0; i < 1000; i++) {
        read++;
        yield records[0]!;
      }
    }
    const one = toBinary(ScheduleRecordSchema, records[0]!).byteLength + 1 + 1;
    const err = await listSchedules(counted(), one * 10 + 1, { ...scheduleSubject, total: async () => 1000 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).rawMessage).toBe(
      `ListSchedules: the answer does not fit the ${one * 10 + 1}-byte message limit: 10 schedules (${one * 10} bytes) were read before the next one (${one} bytes) would exceed it; the store holds 1000 schedules; nothing is returned`,
    );
    expect(read).toBe(11);
    // A store that cannot count does not hide the refusal.
    const noCount = await listSchedules(from(records), 10, { ...scheduleSubject, total: () => Promise.reject(new Error("down")) }).catch((e: unknown) => e);
    expect((noCount as ConnectError).code).toBe(Code.ResourceExhausted);
    expect((noCount as ConnectError).rawMessage).not.toContain("the store holds");
  });

  test("an aborted call stops reading with CANCELLED", async () => {
    const abort = new AbortController();
    abort.abort();
    await expect(listSchedules(from(records), undefined, scheduleSubject, abort.signal)).rejects.toMatchObject({ code: Code.Canceled });
  });

  test("an answer type that is not one repeated field of the entry type is refused", async () => {
    await expect(encodeAnswer(ListSessionsResponseSchema, ScheduleRecordSchema, from([]), scheduleSubject)).rejects.toThrow(/not an answer of one repeated/);
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
