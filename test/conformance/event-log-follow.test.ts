import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Code, type Client } from "@connectrpc/connect";
import { EventLogService } from "../../gen/mecatl/driver/v1/event_log_pb.js";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { conformanceBackends, sharedConformanceBackends, type TestBackend } from "../helpers/backends.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { grpcClient } from "../helpers/clients.js";
import { expectCode } from "../helpers/errors.js";
import { waitFor } from "../helpers/wait.js";
import { inParallel } from "../helpers/seed.js";
import { METRICS_FLAGS, serverMetric } from "../helpers/metrics.js";
import { appendSeqs, body, decodeEnvelope, ev, expectReason, openFollow, readAfterAll, readBodies, seqsOf, take, type EventLogClient, type FollowStream, parkedFollow } from "../helpers/event-log.js";

/** Positions (the `p` of each cursor) of a run of records. */
function positions(rs: Array<{ cursor: string }>): number[] {
  return rs.map((r) => Number(decodeEnvelope(r.cursor).p));
}

/** Rejects when `promise` takes longer than `ms` (a hang bound, not a speed check). */
function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

describe.each(sharedConformanceBackends())("EventLogService follow across two server processes on $name", (backend: TestBackend) => {
  let a: ServerProcess;
  let b: ServerProcess;
  let logA: EventLogClient;
  let logB: EventLogClient;
  let sessionsA: Client<typeof SessionStoreService>;

  beforeAll(async () => {
    const { store } = await backend.setup();
    [a, b] = await Promise.all([startServer(["event-log", "session-store", "--store", store, ...METRICS_FLAGS]), startServer(["event-log", "session-store", "--store", store, ...METRICS_FLAGS])]);
    logA = grpcClient(EventLogService, a.address);
    logB = grpcClient(EventLogService, b.address);
    sessionsA = grpcClient(SessionStoreService, a.address);
  });
  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    await backend.teardown();
  });

  test("8.10 #16: a second server over the same store replays and follows the first one's appends", async () => {
    await appendSeqs(logA, "x-second-reader", [0], "written elsewhere");
    const got = await readAfterAll(logB, { sessionId: "x-second-reader" });
    expect(got.map((r) => body(r.event?.payload).text)).toEqual(["written elsewhere"]);
    const { stream, outcome } = await parkedFollow(logB, b, "x-second-reader", got[0]!.cursor);
    await appendSeqs(logA, "x-second-reader", [1], "live from elsewhere");
    const live = await outcome;
    expect(body(live.event?.payload).text).toBe("live from elsewhere");
    expect(live.live).toBe(true);
    stream.cancel();
  });

  test("a follower on one server, attached before the first append, receives the other server's first append", async () => {
    const { stream, outcome } = await parkedFollow(logB, b, "x-first-append");
    const [cursor] = await appendSeqs(logA, "x-first-append", [0]);
    const got = await outcome;
    expect([got.cursor, got.live]).toEqual([cursor, true]);
    stream.cancel();
  });

  test("a follower parked on one server gets cursor_expired when the session is deleted through the other", async () => {
    const [cursor] = await appendSeqs(logA, "x-delete", [0]);
    const { outcome } = await parkedFollow(logB, b, "x-delete", cursor);
    await sessionsA.delete({ sessionId: "x-delete" });
    await expectReason(outcome, Code.FailedPrecondition, "cursor_expired");
    // A follower parked on the replacement log is woken with its records, not an error.
    const fresh = openFollow(logB, { sessionId: "x-delete" });
    const first = fresh.next();
    await appendSeqs(logA, "x-delete", [1]);
    expect(seqsOf([await first])).toEqual([1]);
    fresh.cancel();
  });

  test("backfill-to-live hand-over skips and repeats nothing while both servers append", async () => {
    const id = "x-handover";
    const writers = 4;
    const each = 60;
    const total = writers * each;
    await appendSeqs(logA, id, [-1]);
    const followers: Array<{ stream: FollowStream; want: number }> = [];
    const write = async (w: number) => {
      const client = w % 2 === 0 ? logA : logB;
      for (let i = 0; i < each; i++) {
        await client.append({ sessionId: id, event: ev({ seq: w * 1000 + i }) });
        // Attach followers on both servers while appends are flowing, from the beginning and from a mid-log cursor.
        if (w === 0 && i % 15 === 5) {
          followers.push({ stream: openFollow(i % 2 === 0 ? logA : logB, { sessionId: id }), want: total + 1 });
          const mid = await readAfterAll(logA, { sessionId: id, limit: 1 + i });
          followers.push({ stream: openFollow(i % 2 === 0 ? logB : logA, { sessionId: id, cursor: mid.at(-1)!.cursor }), want: total - i });
        }
      }
    };
    await Promise.all(Array.from({ length: writers }, (_, w) => write(w)));
    const log = await readAfterAll(logA, { sessionId: id });
    expect(log).toHaveLength(total + 1);
    for (const f of followers) {
      const got = await take(f.stream, f.want);
      f.stream.cancel();
      const start = total + 2 - f.want;
      expect(positions(got)).toEqual(Array.from({ length: f.want }, (_, k) => start + k));
      expect(seqsOf(got)).toEqual(seqsOf(log.slice(start - 1)));
    }
    // Each writer's own appends stay in its order.
    for (let w = 0; w < writers; w++) {
      const mine = seqsOf(log).filter((s) => s !== undefined && s >= w * 1000 && s < w * 1000 + each);
      expect(mine).toEqual(Array.from({ length: each }, (_, i) => w * 1000 + i));
    }
  });

  test("an append racing a follower's first drain is delivered exactly once (40 trials, both servers)", async () => {
    for (let trial = 0; trial < 40; trial++) {
      const id = `x-race-${trial}`;
      const before = trial % 3;
      await appendSeqs(logA, id, Array.from({ length: before }, (_, i) => i));
      const stream = openFollow(trial % 2 === 0 ? logA : logB, { sessionId: id });
      const [got] = await Promise.all([withTimeout(take(stream, before + 1), 15_000, `trial ${trial}`), appendSeqs(trial % 4 < 2 ? logA : logB, id, [before])]);
      expect(positions(got)).toEqual(Array.from({ length: before + 1 }, (_, i) => i + 1));
      stream.cancel();
    }
  });

  test("SIGTERM ends a parked follow with UNAVAILABLE so the client resumes elsewhere", async () => {
    const [cursor] = await appendSeqs(logA, "x-shutdown", [0]);
    const { outcome } = await parkedFollow(logB, b, "x-shutdown", cursor);
    await b.stop();
    await expectCode(outcome, Code.Unavailable);
    await appendSeqs(logA, "x-shutdown", [1]);
    expect(seqsOf(await readAfterAll(logA, { sessionId: "x-shutdown", cursor }))).toEqual([1]);
  });
});

describe.each(conformanceBackends())("EventLogService follow limits on $name", (backend: TestBackend) => {
  let server: ServerProcess;
  let log: EventLogClient;

  beforeAll(async () => {
    const { store } = await backend.setup();
    server = await startServer(["event-log", "--store", store, "--max-followers", "3", "--follow-buffer", "16", ...METRICS_FLAGS]);
    log = grpcClient(EventLogService, server.address);
  });
  afterAll(async () => {
    await server?.stop();
    await backend.teardown();
  });

  const followersGauge = () => serverMetric(server, "mecatl_drivers_followers");

  test("past --max-followers a follow gets RESOURCE_EXHAUSTED follow_capacity; a freed slot admits again", async () => {
    await appendSeqs(log, "cap", [0]);
    const open = [openFollow(log, { sessionId: "cap" }), openFollow(log, { sessionId: "cap-other" }), openFollow(log, { sessionId: "cap" })];
    await open[0]!.next();
    await open[2]!.next();
    await waitFor(async () => (await followersGauge()) === 3, 10_000, "three followers admitted");
    await expectReason(readAfterAll(log, { sessionId: "cap", follow: true }), Code.ResourceExhausted, "follow_capacity");
    // Reads without follow are not limited.
    expect(seqsOf(await readAfterAll(log, { sessionId: "cap" }))).toEqual([0]);
    open[1]!.cancel();
    await waitFor(async () => (await followersGauge()) === 2, 10_000, "the cancelled follower to give up its slot");
    const again = openFollow(log, { sessionId: "cap" });
    expect(seqsOf([await again.next()])).toEqual([0]);
    for (const s of [open[0]!, open[2]!, again]) s.cancel();
    await waitFor(async () => (await followersGauge()) === 0, 10_000, "every follower to be released");
  });

  test("a live follower that stops reading ends with follow_lagging, never slows writers, and resumes exactly", async () => {
    const id = "lagging";
    const [first] = await appendSeqs(log, id, [0]);
    const { stream, outcome: pending } = await parkedFollow(log, server, id, first);
    // The client reads nothing while 200 × 128 KiB records are appended: 25 MiB, far beyond what
    // HTTP/2 flow control and the socket buffers let the server push, so the follower stalls
    // more than --follow-buffer records behind, and is cut off --follow-stall later.
    const filler = "z".repeat(128 * 1024);
    for (let seq = 1; seq <= 200; seq++) await log.append({ sessionId: id, event: ev({ seq, text: filler }) });
    await waitFor(async () => (await followersGauge()) === 0, 15_000, "the stalled follower to be cut off");
    const got = [];
    let failure: unknown;
    try {
      got.push(await pending);
      for (;;) got.push(await stream.next());
    } catch (err) {
      failure = err;
    }
    await expectReason(Promise.reject(failure), Code.ResourceExhausted, "follow_lagging");
    expect(got.length).toBeLessThan(200);
    expect(seqsOf(got)).toEqual(Array.from({ length: got.length }, (_, i) => i + 1));
    const resume = got.length > 0 ? got.at(-1)!.cursor : first!;
    const rest = await readAfterAll(log, { sessionId: id, cursor: resume });
    expect(seqsOf(rest)).toEqual(Array.from({ length: 200 - got.length }, (_, i) => got.length + i + 1));
    await waitFor(async () => (await followersGauge()) === 0, 10_000, "the lagging follower to be released");
  });

  test("a follower that keeps reading through a burst far past --follow-buffer is never cut off (it holds no queue)", async () => {
    const id = "burst";
    const [first] = await appendSeqs(log, id, [0]);
    const { stream, outcome: pending } = await parkedFollow(log, server, id, first);
    // 400 appends, 32 in flight, to a follower allowed 16 records of lag: it falls behind by far
    // more than 16 while it reads, but it reads the whole time.
    const seqs = Array.from({ length: 400 }, (_, i) => i + 1);
    const appended = inParallel(seqs, 32, (seq) => log.append({ sessionId: id, event: ev({ seq }) }));
    const got = [await pending, ...(await take(stream, seqs.length - 1))];
    await appended;
    expect(positions(got)).toEqual(seqs.map((s) => s + 1));
    expect([...seqsOf(got)].sort((a, b) => a - b)).toEqual(seqs);
    stream.cancel();
    await waitFor(async () => (await followersGauge()) === 0, 10_000, "the follower to be released");
  });

  test("many followers of one session all receive each append once, in order", async () => {
    const id = "fan-out";
    const streams = [openFollow(log, { sessionId: id }), openFollow(log, { sessionId: id }), openFollow(log, { sessionId: id })];
    const reads = streams.map((s) => take(s, 12));
    await appendSeqs(log, id, Array.from({ length: 12 }, (_, i) => i));
    for (const got of await Promise.all(reads)) {
      expect(seqsOf(got)).toEqual(Array.from({ length: 12 }, (_, i) => i));
      expect(positions(got)).toEqual(Array.from({ length: 12 }, (_, i) => i + 1));
    }
    for (const s of streams) s.cancel();
    expect((await readBodies(log, id)).length).toBe(12);
  });
});
