import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Code, type Client } from "@connectrpc/connect";
import { randomBytes } from "node:crypto";
import { EventLogService } from "../../gen/mecatl/driver/v1/event_log_pb.js";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { conformanceBackends, type TestBackend } from "../helpers/backends.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { grpcClient } from "../helpers/clients.js";
import { expectCode } from "../helpers/errors.js";
import { METRICS_FLAGS } from "../helpers/metrics.js";
import {
  EVENT_FORMAT,
  appendSeqs,
  body,
  decodeEnvelope,
  encodeEnvelope,
  ev,
  expectReason,
  openFollow,
  parkedFollow,
  readAfterAll,
  readBodies,
  seqsOf,
  take,
  type EventLogClient,
} from "../helpers/event-log.js";

describe.each(conformanceBackends())("EventLogService on $name", (backend: TestBackend) => {
  let server: ServerProcess;
  let client: EventLogClient;
  let sessions: Client<typeof SessionStoreService>;

  beforeAll(async () => {
    const { store } = await backend.setup();
    server = await startServer(["event-log", "session-store", "--store", store, ...METRICS_FLAGS]);
    client = grpcClient(EventLogService, server.address);
    sessions = grpcClient(SessionStoreService, server.address);
  });
  afterAll(async () => {
    await server?.stop();
    await backend.teardown();
  });

  /** The out-of-band reset of 8.10: deleting the session through the session store on the same store. */
  const reset = (sessionId: string) => sessions.delete({ sessionId });

  describe("8.9 event log", () => {
    test("append then read returns events in append order", async () => {
      await appendSeqs(client, "el-order", [1, 2, 3, 4], "t");
      expect((await readBodies(client, "el-order")).map((b) => b.seq)).toEqual([1, 2, 3, 4]);
    });

    test("read of an unknown session is an empty stream, not NOT_FOUND", async () => {
      expect(await readBodies(client, "el-never-appended")).toEqual([]);
    });

    test("distinct sessions keep distinct logs", async () => {
      await appendSeqs(client, "el-a", [1, 2]);
      await appendSeqs(client, "el-b", [7]);
      expect((await readBodies(client, "el-a")).map((b) => b.seq)).toEqual([1, 2]);
      expect((await readBodies(client, "el-b")).map((b) => b.seq)).toEqual([7]);
    });

    test("read does not reorder by seq (30, 10, 20 stays)", async () => {
      await appendSeqs(client, "el-raw-order", [30, 10, 20]);
      expect((await readBodies(client, "el-raw-order")).map((b) => b.seq)).toEqual([30, 10, 20]);
    });

    test("a ~160 KiB event round-trips byte for byte", async () => {
      const payload = new TextEncoder().encode(JSON.stringify({ seq: 1, text: randomBytes(120 * 1024).toString("base64") }));
      expect(payload.length).toBeGreaterThan(155 * 1024);
      await client.append({ sessionId: "el-large", event: { format: EVENT_FORMAT, payload } });
      const got = [];
      for await (const r of client.read({ sessionId: "el-large" })) got.push(r);
      expect(got).toHaveLength(1);
      expect(got[0]!.event?.format).toBe(EVENT_FORMAT);
      expect(Buffer.from(got[0]!.event!.payload).equals(Buffer.from(payload))).toBe(true);
    });

    test("80 × 64 KiB events cross the 4 MiB framing boundary in order", async () => {
      const filler = "x".repeat(64 * 1024);
      for (let seq = 0; seq < 80; seq++) await client.append({ sessionId: "el-cumulative", event: ev({ seq, text: filler }) });
      const got = await readBodies(client, "el-cumulative");
      expect(got.map((b) => b.seq)).toEqual(Array.from({ length: 80 }, (_, i) => i));
      expect(got.every((b) => b.text === filler)).toBe(true);
      const after = await readAfterAll(client, { sessionId: "el-cumulative" });
      expect(seqsOf(after)).toEqual(Array.from({ length: 80 }, (_, i) => i));
    });

    test("breaking a read early releases it, and a later full read still returns 5", async () => {
      await appendSeqs(client, "el-early-break", [0, 1, 2, 3, 4]);
      for await (const r of client.read({ sessionId: "el-early-break" })) {
        expect(body(r.event?.payload).seq).toBe(0);
        break;
      }
      expect((await readBodies(client, "el-early-break")).map((b) => b.seq)).toEqual([0, 1, 2, 3, 4]);
    });

    test("concurrent appends and reads across 8 sessions × 25 events keep per-session order", async () => {
      const ids = Array.from({ length: 8 }, (_, i) => `el-concurrent-${i}`);
      const seqs = Array.from({ length: 25 }, (_, i) => i);
      const readers = ids.map(async (id) => {
        for (let i = 0; i < 5; i++) {
          const got = (await readBodies(client, id)).map((b) => b.seq);
          expect(got).toEqual(seqs.slice(0, got.length));
        }
      });
      await Promise.all([...ids.map((id) => appendSeqs(client, id, seqs)), ...readers]);
      for (const id of ids) expect((await readBodies(client, id)).map((b) => b.seq)).toEqual(seqs);
    });

    test("a log deleted and recreated under a streaming Read or ReadAfter ends the stream, never mixing logs", async () => {
      // 150 × 64 KiB is far more than the server can buffer ahead of a client that stops reading,
      // so the delete lands while most pages are still unread.
      const filler = "d".repeat(64 * 1024);
      for (const [mode, code, reason] of [
        ["read", Code.Aborted, undefined],
        ["readAfter", Code.FailedPrecondition, "cursor_expired"],
      ] as const) {
        const id = `el-replaced-${mode}`;
        for (let seq = 0; seq < 150; seq++) await client.append({ sessionId: id, event: ev({ seq, text: filler }) });
        const it = (mode === "read" ? client.read({ sessionId: id }) : client.readAfter({ sessionId: id }))[Symbol.asyncIterator]();
        const seqs = [body((await it.next()).value!.event?.payload).seq];
        await reset(id);
        await appendSeqs(client, id, [1000]);
        let failure: unknown;
        try {
          for (let r = await it.next(); r.done !== true; r = await it.next()) seqs.push(body(r.value.event?.payload).seq);
        } catch (err) {
          failure = err;
        }
        if (reason === undefined) await expectCode(Promise.reject(failure), code);
        else await expectReason(Promise.reject(failure), code, reason);
        expect(seqs).toEqual(Array.from({ length: seqs.length }, (_, k) => k));
        expect(seqs.length).toBeLessThan(150);
      }
    });

    test("payload bytes are stored verbatim (whitespace, key order, escapes)", async () => {
      const text = ' {"seq" : 1,\n "b":"\\u00e9\u00e9", "a" : [ ] } ';
      const payload = new TextEncoder().encode(text);
      await client.append({ sessionId: "el-verbatim", event: { format: EVENT_FORMAT, payload } });
      const [got] = await readAfterAll(client, { sessionId: "el-verbatim" });
      expect(new TextDecoder().decode(got!.event!.payload)).toBe(text);
    });
  });

  describe("8.10 cursors", () => {
    test("1. append returns cursors and ReadAfter replays from the beginning", async () => {
      const cursors = await appendSeqs(client, "cur-replay", [0, 1, 2]);
      expect(cursors.every((c) => c !== "")).toBe(true);
      const got = await readAfterAll(client, { sessionId: "cur-replay", cursor: "" });
      expect(seqsOf(got)).toEqual([0, 1, 2]);
      expect(got.map((r) => r.kind)).toEqual(["event", "event", "event"]);
      expect(got.map((r) => r.live)).toEqual([false, false, false]);
      expect(got.map((r) => r.cursor)).toEqual(cursors);
      expect(got.every((r) => r.gapReason === "")).toBe(true);
    });

    test("the cursor envelope is base64url JSON {v,s,g,p} with a 16-hex generation", async () => {
      const [cursor] = await appendSeqs(client, "cur-envelope", [0]);
      expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
      expect(Buffer.from(cursor!, "base64url").toString("utf8")).toMatch(/^\{"v":"cur\/1","s":"cur-envelope","g":"[0-9a-f]{16}","p":"1"\}$/);
    });

    test("2. a cursor resumes strictly after its record (every prefix)", async () => {
      const cursors = await appendSeqs(client, "cur-resume", [0, 1, 2, 3, 4]);
      for (let after = 0; after < 5; after++) {
        const got = await readAfterAll(client, { sessionId: "cur-resume", cursor: cursors[after] });
        expect(seqsOf(got)).toEqual([0, 1, 2, 3, 4].slice(after + 1));
      }
    });

    test("3. the newest cursor yields nothing", async () => {
      const cursors = await appendSeqs(client, "cur-tail", [0, 1, 2]);
      expect(await readAfterAll(client, { sessionId: "cur-tail", cursor: cursors[2] })).toEqual([]);
    });

    test("4. ReadAfter of an unknown session is an empty stream", async () => {
      expect(await readAfterAll(client, { sessionId: "cur-never-appended" })).toEqual([]);
    });

    test("5. limit bounds the batch and its last cursor resumes exactly", async () => {
      await appendSeqs(client, "cur-paging", Array.from({ length: 10 }, (_, i) => i));
      const seen: Array<number | undefined> = [];
      const sizes: number[] = [];
      let cursor = "";
      for (;;) {
        const batch = await readAfterAll(client, { sessionId: "cur-paging", cursor, limit: 3 });
        if (batch.length === 0) break;
        sizes.push(batch.length);
        seen.push(...seqsOf(batch));
        cursor = batch.at(-1)!.cursor;
      }
      // Without follow a read streams what exists, up to the limit: full batches until the last.
      expect(sizes).toEqual([3, 3, 3, 1]);
      expect(seen).toEqual(Array.from({ length: 10 }, (_, i) => i));
    });

    test("6. a legacy Append is visible and positioned in the cursor space", async () => {
      const [first] = await appendSeqs(client, "cur-legacy", [0], "via first append");
      await appendSeqs(client, "cur-legacy", [1], "via legacy append");
      const after = await readAfterAll(client, { sessionId: "cur-legacy", cursor: first });
      expect(after.map((r) => body(r.event?.payload).text)).toEqual(["via legacy append"]);
      expect(after[0]!.cursor).not.toBe(first);
    });

    test("7. a cursor issued for another session is malformed", async () => {
      const [curA] = await appendSeqs(client, "cur-session-a", [0]);
      await appendSeqs(client, "cur-session-b", [0, 1, 2, 3, 4]);
      await expectReason(readAfterAll(client, { sessionId: "cur-session-b", cursor: curA }), Code.InvalidArgument, "cursor_malformed");
    });

    test("8. a gap consumes a limit slot like an event", async () => {
      await appendSeqs(client, "cur-gap-limit", [0], "one");
      await client.appendGap({ sessionId: "cur-gap-limit", reason: "append failed here" });
      await appendSeqs(client, "cur-gap-limit", [1], "two");
      const page = await readAfterAll(client, { sessionId: "cur-gap-limit", limit: 2 });
      expect(page.map((r) => r.kind)).toEqual(["event", "gap"]);
      const rest = await readAfterAll(client, { sessionId: "cur-gap-limit", cursor: page[1]!.cursor });
      expect(rest.map((r) => body(r.event?.payload).text)).toEqual(["two"]);
    });

    test("9. limit ends a following read", async () => {
      await appendSeqs(client, "cur-limit-follow", [0, 1, 2]);
      const got = await readAfterAll(client, { sessionId: "cur-limit-follow", limit: 2, follow: true });
      expect(seqsOf(got)).toEqual([0, 1]);
    });

    test("9b. limit counts live records too and ends the follow", async () => {
      await appendSeqs(client, "cur-limit-live", [0]);
      const stream = openFollow(client, { sessionId: "cur-limit-live", limit: 3 });
      expect((await stream.next()).live).toBe(false);
      await appendSeqs(client, "cur-limit-live", [1, 2, 3]);
      const rest = await take(stream, 2);
      expect(seqsOf(rest)).toEqual([1, 2]);
      expect(await stream.ended()).toBe(true);
    });

    test("10. follow delivers appends made after the read started; cancel ends cleanly", async () => {
      await appendSeqs(client, "cur-follow", [0], "before");
      const stream = openFollow(client, { sessionId: "cur-follow" });
      const first = await stream.next();
      expect(body(first.event?.payload).text).toBe("before");
      expect(first.live).toBe(false);
      await appendSeqs(client, "cur-follow", [1], "after");
      const second = await stream.next();
      expect(body(second.event?.payload).text).toBe("after");
      expect(second.live).toBe(true);
      await expectCode(Promise.reject(await stream.cancel()), Code.Canceled);
    });

    test("10b. a follower attached before the first append receives it live, not as a reset", async () => {
      const { stream, outcome: first } = await parkedFollow(client, server, "cur-follow-empty");
      const [cursor] = await appendSeqs(client, "cur-follow-empty", [0], "first ever");
      const got = await first;
      expect(body(got.event?.payload).text).toBe("first ever");
      expect(got.live).toBe(true);
      expect(got.cursor).toBe(cursor);
      await appendSeqs(client, "cur-follow-empty", [1]);
      expect(seqsOf([await stream.next()])).toEqual([1]);
      stream.cancel();
    });

    test("11. a gap occupies a position, carries its reason, and is skipped by Read", async () => {
      await appendSeqs(client, "cur-gap", [0], "one");
      const gap = await client.appendGap({ sessionId: "cur-gap", reason: "backend rejected the record" });
      expect(gap.cursor).not.toBe("");
      await appendSeqs(client, "cur-gap", [1], "two");
      const recs = await readAfterAll(client, { sessionId: "cur-gap" });
      expect(recs.map((r) => r.kind)).toEqual(["event", "gap", "event"]);
      expect(recs[1]!.gapReason).toBe("backend rejected the record");
      expect(recs[1]!.event).toBeUndefined();
      expect(recs[1]!.cursor).toBe(gap.cursor);
      const after = await readAfterAll(client, { sessionId: "cur-gap", cursor: gap.cursor });
      expect(after.map((r) => body(r.event?.payload).text)).toEqual(["two"]);
      expect((await readBodies(client, "cur-gap")).map((b) => b.text)).toEqual(["one", "two"]);
    });

    test("11b. an empty gap reason is allowed; Read stays unbroken with gaps interleaved", async () => {
      await client.appendGap({ sessionId: "cur-gaps", reason: "" });
      await appendSeqs(client, "cur-gaps", [0]);
      await client.appendGap({ sessionId: "cur-gaps", reason: "r2" });
      await client.appendGap({ sessionId: "cur-gaps", reason: "r3" });
      await appendSeqs(client, "cur-gaps", [1]);
      expect((await readBodies(client, "cur-gaps")).map((b) => b.seq)).toEqual([0, 1]);
      const recs = await readAfterAll(client, { sessionId: "cur-gaps" });
      expect(recs.map((r) => [r.kind, r.gapReason])).toEqual([["gap", ""], ["event", ""], ["gap", "r2"], ["gap", "r3"], ["event", ""]]);
      expect(new Set(recs.map((r) => r.cursor)).size).toBe(5);
    });

    test("12. a cursor from a superseded generation expires (reset = session delete)", async () => {
      const [stale] = await appendSeqs(client, "cur-generation", [0], "old basis");
      await reset("cur-generation");
      await appendSeqs(client, "cur-generation", [0], "new basis");
      const err = await expectReason(readAfterAll(client, { sessionId: "cur-generation", cursor: stale }), Code.FailedPrecondition, "cursor_expired");
      const fresh = decodeEnvelope((await readAfterAll(client, { sessionId: "cur-generation" }))[0]!.cursor).g;
      expect(fresh).not.toBe(decodeEnvelope(stale!).g);
      expect(err.rawMessage).not.toContain(fresh);
    });

    test("12b. a cursor into a deleted, not yet recreated log expires", async () => {
      const [stale] = await appendSeqs(client, "cur-deleted", [0]);
      await reset("cur-deleted");
      await expectReason(readAfterAll(client, { sessionId: "cur-deleted", cursor: stale }), Code.FailedPrecondition, "cursor_expired");
      expect(await readBodies(client, "cur-deleted")).toEqual([]);
    });

    test("13. a reset during a live follow expires the cursor", async () => {
      await appendSeqs(client, "cur-reset-follow", [0], "old basis");
      const stream = openFollow(client, { sessionId: "cur-reset-follow" });
      expect(body((await stream.next()).event?.payload).text).toBe("old basis");
      await reset("cur-reset-follow");
      await appendSeqs(client, "cur-reset-follow", [0], "new basis");
      await expectReason(stream.next(), Code.FailedPrecondition, "cursor_expired");
    });

    test("13b. a delete alone wakes a parked follower with cursor_expired", async () => {
      const [cursor] = await appendSeqs(client, "cur-delete-follow", [0]);
      const { outcome } = await parkedFollow(client, server, "cur-delete-follow", cursor);
      await reset("cur-delete-follow");
      await expectReason(outcome, Code.FailedPrecondition, "cursor_expired");
    });

    test("14. a malformed cursor is rejected, never coerced", async () => {
      const id = "cur-malformed";
      const [issued] = await appendSeqs(client, id, [0]);
      const real = decodeEnvelope(issued!);
      const strict: Record<string, string> = {
        "not base64": "!!!not-base64!!!",
        "base64 of non-JSON": encodeEnvelope("hello"),
        "unknown version": encodeEnvelope({ ...real, v: "cur/999" }),
        "unknown field": encodeEnvelope('{"v":"cur/1","s":"x","g":"x","p":"1","extra":true}'),
        "foreign session": encodeEnvelope({ ...real, s: "a-different-session" }),
        "padded base64": `${issued}${"=".repeat(issued!.length % 4 === 3 ? 1 : 2)}`,
        "the failed-encode sentinel": "!",
        "missing field": encodeEnvelope({ v: real.v, s: real.s, g: real.g }),
        "numeric position": encodeEnvelope(`{"v":"cur/1","s":"${id}","g":"${real.g}","p":1}`),
        "JSON array": encodeEnvelope([real.v, real.s, real.g, real.p]),
        "unknown field with the right four": encodeEnvelope({ ...real, extra: "x" }),
        "position zero": encodeEnvelope({ ...real, p: "0" }),
        "position with a sign": encodeEnvelope({ ...real, p: "+1" }),
        "position with a leading zero": encodeEnvelope({ ...real, p: "01" }),
        "position beyond the log": encodeEnvelope({ ...real, p: "2" }),
        "generation of the wrong shape": encodeEnvelope({ ...real, g: real.g.toUpperCase() }),
        "a repeated field (the last one valid)": encodeEnvelope(`{"v":"cur/1","s":"${id}","g":"${real.g}","p":"9","p":"1"}`),
        "a repeated field with the same value": encodeEnvelope(`{"v":"cur/1","s":"${id}","s":"${id}","g":"${real.g}","p":"1"}`),
        "a byte order mark before the JSON": Buffer.from(`\ufeff${JSON.stringify(real)}`, "utf8").toString("base64url"),
      };
      for (const [name, cursor] of Object.entries(strict)) {
        await expectReason(readAfterAll(client, { sessionId: id, cursor }), Code.InvalidArgument, "cursor_malformed").catch((e: Error) => {
          throw new Error(`${name}: ${e.message}`);
        });
        await expectReason(readAfterAll(client, { sessionId: id, cursor, follow: true }), Code.InvalidArgument, "cursor_malformed");
      }
      const unresolvable = encodeEnvelope({ ...real, p: "not-a-position-any-backend-can-resolve" });
      // The suite also tolerates cursor_expired here; section 3.8 says malformed, and so does this driver.
      await expectReason(readAfterAll(client, { sessionId: id, cursor: unresolvable }), Code.InvalidArgument, "cursor_malformed");
      // The real cursor still works after all that.
      expect(await readAfterAll(client, { sessionId: id, cursor: issued })).toEqual([]);
    });

    test("14b. a cursor in the standard base64 alphabet (+ and /) is malformed", async () => {
      const id = "cur-alphabet-???>>>~~~";
      const [issued] = await appendSeqs(client, id, [0, 1]);
      expect(issued).toMatch(/[-_]/);
      const standard = issued!.replaceAll("-", "+").replaceAll("_", "/");
      await expectReason(readAfterAll(client, { sessionId: id, cursor: standard }), Code.InvalidArgument, "cursor_malformed");
      expect(seqsOf(await readAfterAll(client, { sessionId: id, cursor: issued }))).toEqual([1]);
    });

    test("15. concurrent appends and a follower: 50 records in order", async () => {
      const stream = openFollow(client, { sessionId: "cur-concurrent" });
      const seqs = Array.from({ length: 50 }, (_, i) => i);
      const [got] = await Promise.all([take(stream, 50), appendSeqs(client, "cur-concurrent", seqs)]);
      expect(seqsOf(got)).toEqual(seqs);
      stream.cancel();
    });
  });

  describe("request validation (3.4, 3.6, 8.11)", () => {
    const good = ev({ seq: 1 });
    const badAppends: Array<[string, Record<string, unknown>, string]> = [
      ["blank session_id", { sessionId: "", event: good }, "session_id"],
      ["whitespace session_id", { sessionId: "  \t", event: good }, "session_id"],
      ["missing event", { sessionId: "bad-append-1" }, "event"],
      ["unknown format", { sessionId: "bad-append-2", event: { format: "eventlog-json/99", payload: good.payload } }, "event.format"],
      ["empty format", { sessionId: "bad-append-3", event: { format: "", payload: good.payload } }, "event.format"],
      ["empty payload", { sessionId: "bad-append-4", event: { format: EVENT_FORMAT, payload: new Uint8Array() } }, "event.payload"],
      ["undecodable payload", { sessionId: "bad-append-5", event: { format: EVENT_FORMAT, payload: new TextEncoder().encode("{not json") } }, "event.payload"],
      ["non-object payload", { sessionId: "bad-append-6", event: { format: EVENT_FORMAT, payload: new TextEncoder().encode("[1,2]") } }, "event.payload"],
      // Not JSON (RFC 8259 section 8.1): Go's encoding/json, the harness's reader, refuses it.
      ["payload starting with a byte order mark", { sessionId: "bad-append-7", event: { format: EVENT_FORMAT, payload: new TextEncoder().encode('\ufeff{"seq":1}') } }, "event.payload"],
    ];
    test.each(badAppends)("Append rejects %s with INVALID_ARGUMENT naming the field and stores nothing", async (_label, req, field) => {
      await expectCode(client.append(req as never), Code.InvalidArgument, field);
      const id = (req as { sessionId: string }).sessionId;
      if (id.trim() !== "") {
        expect(await readAfterAll(client, { sessionId: id })).toEqual([]);
        // The next good append is the first record of the log.
        const { cursor } = await client.append({ sessionId: id, event: good });
        expect(decodeEnvelope(cursor).p).toBe("1");
      }
    });

    test("AppendGap, Read and ReadAfter reject a blank session_id", async () => {
      await expectCode(client.appendGap({ sessionId: " ", reason: "x" }), Code.InvalidArgument, "session_id");
      await expectCode(readBodies(client, ""), Code.InvalidArgument, "session_id");
      await expectCode(readAfterAll(client, { sessionId: "" }), Code.InvalidArgument, "session_id");
    });

    test("ReadAfter rejects a negative limit", async () => {
      await appendSeqs(client, "bad-limit", [0]);
      await expectCode(readAfterAll(client, { sessionId: "bad-limit", limit: -1 }), Code.InvalidArgument, "limit");
      await expectCode(readAfterAll(client, { sessionId: "bad-limit", limit: -1, follow: true }), Code.InvalidArgument, "limit");
    });

    test("a session id longer than 16 KiB is rejected", async () => {
      await expectCode(client.append({ sessionId: "y".repeat(16 * 1024 + 1), event: good }), Code.InvalidArgument, "session_id");
    });

    test("odd session ids (unicode, braces, NUL, colons) keep separate logs and cursors", async () => {
      const ids = ["é-🦀-{brace}-tag", "with:colon:0-1", "nul-\u0000-byte", "{", "x".repeat(4096)];
      for (const [i, id] of ids.entries()) await appendSeqs(client, id, [i, i + 100]);
      for (const [i, id] of ids.entries()) {
        const got = await readAfterAll(client, { sessionId: id });
        expect(seqsOf(got)).toEqual([i, i + 100]);
        expect(seqsOf(await readAfterAll(client, { sessionId: id, cursor: got[0]!.cursor }))).toEqual([i + 100]);
      }
    });
  });
});
