/**
 * EventLogService benchmark (issue 3), on an SQLite file and on a spawned
 * durable redis-server (appendonly yes, appendfsync always):
 *
 *  1. Append: appends/s and p50/p99 latency at 1, 16 and 64 appenders in
 *     flight, through the server (gRPC) and, in the same run, through the
 *     same store code in-process with no RPC (the same durable writes: the
 *     SQLite worker's group commit, the Redis append script). Beside them the
 *     transport floor (a bare grpc-js server answering a request of the same
 *     size with no work, bench/lib/floor-server.ts) and, on SQLite, the same
 *     write with one transaction (one fsync) per append: the rate a driver
 *     without group commit would top out at.
 *  2. Follow delivery latency: append acknowledged → follower received, for a
 *     follower on the appender's server and one on a second server process
 *     over the same store.
 *  3. Server RSS while streaming a 1,000,000-event log with ReadAfter, and
 *     while holding 1,000 idle followers (each on its own session).
 *
 * Run: npm run build && node dist/bench/event-log.js [seconds-per-case] [events-to-stream]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import type { Client } from "@connectrpc/connect";
import { EventLogService } from "../gen/mecatl/driver/v1/event_log_pb.js";
import { startServer, type ServerProcess } from "../test/helpers/server.js";
import { spawnRedis, type SpawnedRedis } from "../test/helpers/redis-server.js";
import { rawGrpcClient, rawUnary } from "../test/helpers/raw-grpc.js";
import { grpcClient } from "../test/helpers/clients.js";
import { SqliteDatabase } from "../services/storage/sqlite-database.js";
import { connectRedis } from "../services/storage/redis-connection.js";
import { RedisKeys } from "../services/storage/redis-keys.js";
import { DEFAULT_STORE_TIMEOUT_MS } from "../services/storage/backend.js";
import { applyPragmas, migrate } from "../services/storage/sqlite-schema.js";
import { sqliteMigrations } from "../services/storage/sqlite-registry.js";
import { eventLogOps } from "../services/event-log/sqlite-ops.js";
import { UNLIMITED_READ_BYTES } from "../services/storage/sqlite-op.js";
import { SqliteEventLogStore } from "../services/event-log/sqlite.js";
import { RedisEventLogStore } from "../services/event-log/redis.js";
import type { EventLogStore } from "../services/event-log/store.js";
import { setMaxListeners } from "node:events";
import { create, toBinary } from "@bufbuild/protobuf";
import { AppendRequestSchema } from "../gen/mecatl/driver/v1/event_log_pb.js";
import { startTransportFloor } from "./lib/floor.js";
import { measure, fmt, quantile, type RunResult } from "./lib/measure.js";
import { mib, rssBytes, sampleRss } from "../test/helpers/rss.js";

const seconds = Number(process.argv[2] ?? 3);
const streamEvents = Number(process.argv[3] ?? 1_000_000);
const IDLE_FOLLOWERS = 1000;
const FOLLOW_SAMPLES = 400;
const FORMAT = "eventlog-json/1";

/** A ~200-byte harness-like event. */
function eventPayload(i: number): Uint8Array {
  return new TextEncoder().encode(JSON.stringify({ type: "message_delta", seq: i, text: "lorem ipsum dolor sit amet ".repeat(6) }));
}

const log = (line: string) => process.stderr.write(`${line}\n`);
const out: string[] = [];

type Target = { kind: "sqlite"; dir: string } | { kind: "redis"; redis: SpawnedRedis };

function storeUrl(t: Target, name: string): string {
  return t.kind === "sqlite" ? `sqlite:${join(t.dir, `${name}.sqlite`)}` : t.redis.url;
}

async function inProcessStore(t: Target): Promise<{ store: EventLogStore; close(): Promise<void> }> {
  if (t.kind === "sqlite") {
    const db = await SqliteDatabase.open({ path: join(t.dir, "in-process.sqlite") });
    return { store: new SqliteEventLogStore(db), close: () => db.close() };
  }
  const redis = await connectRedis({ url: t.redis.url });
  return { store: new RedisEventLogStore(redis, new RedisKeys("bench-in-process:"), DEFAULT_STORE_TIMEOUT_MS), close: async () => void (await redis.quit()) };
}

/** Rows of the transport floor, measured once and shown with each backend. */
const floorRows: Array<{ inFlight: number; r: RunResult }> = [];

async function floorBench(): Promise<void> {
  const floor = await startTransportFloor();
  const request = Buffer.from(toBinary(AppendRequestSchema, create(AppendRequestSchema, { sessionId: "bench-0", event: { format: FORMAT, payload: eventPayload(0) } })));
  for (const inFlight of [1, 16, 64]) {
    const r = await measure(() => floor.sink(request), inFlight, seconds * 1000);
    floorRows.push({ inFlight, r });
    log(`grpc-js floor x${inFlight}: ${fmt(r.perSecond)}/s p50 ${fmt(r.p50Ms)} ms p99 ${fmt(r.p99Ms)} ms`);
  }
  floor.stop();
}

async function appendBench(t: Target): Promise<void> {
  const rows: Array<{ target: string; inFlight: number; r: RunResult }> = floorRows.map((f) => ({ target: "grpc-js floor (no work, no storage)", ...f }));
  const record = (target: string, inFlight: number, r: RunResult) => {
    rows.push({ target, inFlight, r });
    log(`${t.kind} ${target.padEnd(30)} x${inFlight}: ${fmt(r.perSecond)}/s p50 ${fmt(r.p50Ms)} ms p99 ${fmt(r.p99Ms)} ms`);
  };
  const payloads = Array.from({ length: 64 }, (_, i) => eventPayload(i));

  if (t.kind === "sqlite") {
    const db = new Database(join(t.dir, "per-append.sqlite"));
    applyPragmas(db, { busyTimeoutMs: 5000, durable: true });
    migrate(db, sqliteMigrations);
    const append = db.transaction((i: number) =>
      eventLogOps["events.append"].run(db, { sessionId: `bench-${i % 64}`, record: { kind: "event", format: FORMAT, payload: payloads[i % 64]! } }, { notify: () => undefined, readBytes: UNLIMITED_READ_BYTES }),
    );
    record("raw: one transaction per append", 1, await measure(async (i) => append(i), 1, seconds * 1000));
    db.close();
  }

  const local = await inProcessStore(t);
  for (const inFlight of [1, 16, 64]) {
    record("in-process store (no RPC)", inFlight, await measure((i) => local.store.append(`bench-${i % 64}`, { kind: "event", format: FORMAT, payload: payloads[i % 64]! }), inFlight, seconds * 1000));
  }
  await local.close();

  const server = await startServer(["event-log", "--store", storeUrl(t, "append")]);
  const client = rawGrpcClient(EventLogService, server.address);
  for (const inFlight of [1, 16, 64]) {
    record(
      "driver over gRPC",
      inFlight,
      await measure((i) => rawUnary(client, EventLogService.method.append, { sessionId: `bench-${i % 64}`, event: { format: FORMAT, payload: payloads[i % 64]! } }), inFlight, seconds * 1000),
    );
  }
  client.close();
  await server.stop();

  out.push(`\n### Append on ${t.kind}\n`);
  out.push("| target | appenders | appends/s | p50 ms | p99 ms | driver ÷ in-process store | driver ÷ floor |");
  out.push("|---|---:|---:|---:|---:|---:|---:|");
  const rate = (target: string, inFlight: number) => rows.find((y) => y.target.startsWith(target) && y.inFlight === inFlight)!.r.perSecond;
  for (const x of rows) {
    const driver = x.target === "driver over gRPC";
    const vsStore = driver ? fmt(x.r.perSecond / rate("in-process store", x.inFlight), 2) : "";
    const vsFloor = driver ? fmt(x.r.perSecond / rate("grpc-js floor", x.inFlight), 2) : "";
    out.push(`| ${x.target} | ${x.inFlight} | ${fmt(x.r.perSecond)} | ${fmt(x.r.p50Ms)} | ${fmt(x.r.p99Ms)} | ${vsStore} | ${vsFloor} |`);
  }
}

/** Opens a follow stream and records the arrival time of each `seq`. */
function follow(client: Client<typeof EventLogService>, sessionId: string, arrivals: Map<number, bigint>, signal: AbortSignal): Promise<void> {
  return (async () => {
    try {
      for await (const r of client.readAfter({ sessionId, follow: true }, { signal })) {
        const seq = (JSON.parse(new TextDecoder().decode(r.event!.payload)) as { seq: number }).seq;
        arrivals.set(seq, process.hrtime.bigint());
      }
    } catch {
      // cancelled at the end
    }
  })();
}

async function followBench(t: Target): Promise<void> {
  const store = storeUrl(t, "follow");
  const [a, b] = await Promise.all([startServer(["event-log", "--store", store]), startServer(["event-log", "--store", store])]);
  const appender = rawGrpcClient(EventLogService, a.address);
  const sameProcess = new Map<number, bigint>();
  const otherProcess = new Map<number, bigint>();
  const abort = new AbortController();
  const done = [follow(grpcClient(EventLogService, a.address), "follow-bench", sameProcess, abort.signal), follow(grpcClient(EventLogService, b.address), "follow-bench", otherProcess, abort.signal)];
  await new Promise((r) => setTimeout(r, 500));
  const acked = new Map<number, bigint>();
  const sent = new Map<number, bigint>();
  for (let seq = 0; seq < FOLLOW_SAMPLES; seq++) {
    sent.set(seq, process.hrtime.bigint());
    await rawUnary(appender, EventLogService.method.append, { sessionId: "follow-bench", event: { format: FORMAT, payload: eventPayload(seq) } });
    acked.set(seq, process.hrtime.bigint());
    await new Promise((r) => setTimeout(r, 5));
  }
  await new Promise((r) => setTimeout(r, 500));
  abort.abort();
  await Promise.all(done);
  appender.close();
  await Promise.all([a.stop(), b.stop()]);

  out.push(`\n### Follow delivery on ${t.kind} (${FOLLOW_SAMPLES} appends, 5 ms apart)\n`);
  out.push("| follower | received | ack → received p50 ms | p99 ms | received before the ack | append sent → received p50 ms | p99 ms |");
  out.push("|---|---:|---:|---:|---:|---:|---:|");
  const delays = (from: Map<number, bigint>, arrivals: Map<number, bigint>) =>
    [...from].filter(([s]) => arrivals.has(s)).map(([s, t0]) => Number(arrivals.get(s)! - t0) / 1e6).sort((x, y) => x - y);
  for (const [name, arrivals] of [["same server process", sameProcess], ["other server process", otherProcess]] as const) {
    const fromAck = delays(acked, arrivals);
    const fromSend = delays(sent, arrivals);
    const early = fromAck.filter((x) => x < 0).length;
    out.push(
      `| ${name} | ${arrivals.size}/${FOLLOW_SAMPLES} | ${fmt(quantile(fromAck, 0.5))} | ${fmt(quantile(fromAck, 0.99))} | ${early} | ${fmt(quantile(fromSend, 0.5))} | ${fmt(quantile(fromSend, 0.99))} |`,
    );
    log(`${t.kind} follow ${name}: ack→received p50 ${fmt(quantile(fromAck, 0.5))} ms p99 ${fmt(quantile(fromAck, 0.99))} ms`);
  }
}

/** Appends `n` events to `sessionId` through the in-process store, 256 in flight. */
async function populate(store: EventLogStore, sessionId: string, n: number): Promise<void> {
  const payload = eventPayload(0);
  let next = 0;
  await Promise.all(
    Array.from({ length: 256 }, async () => {
      while (next < n) {
        next++;
        await store.append(sessionId, { kind: "event", format: FORMAT, payload });
      }
    }),
  );
}

async function rssBench(t: Target): Promise<void> {
  const store = storeUrl(t, "rss");
  // The in-process store writes the same keys/rows the server reads.
  const writer =
    t.kind === "sqlite"
      ? await (async () => {
          const db = await SqliteDatabase.open({ path: join(t.dir, "rss.sqlite") });
          return { store: new SqliteEventLogStore(db) as EventLogStore, close: () => db.close() };
        })()
      : await (async () => {
          const redis = await connectRedis({ url: t.redis.url });
          return { store: new RedisEventLogStore(redis, new RedisKeys("mecatl-drivers:"), DEFAULT_STORE_TIMEOUT_MS) as EventLogStore, close: async () => void (await redis.quit()) };
        })();
  const started = Date.now();
  await populate(writer.store, "big-log", streamEvents);
  log(`${t.kind}: populated ${streamEvents} events in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  for (let i = 0; i < IDLE_FOLLOWERS; i++) await writer.store.append(`idle-${i}`, { kind: "event", format: FORMAT, payload: eventPayload(i) });
  await writer.close();

  const server: ServerProcess = await startServer(["event-log", "--store", store]);
  const pid = server.proc.pid!;
  const client = grpcClient(EventLogService, server.address);
  for await (const _ of client.readAfter({ sessionId: "big-log", limit: 10 })) void _;
  const idle = rssBytes(pid);
  const sampler = sampleRss(pid);
  const t0 = Date.now();
  let n = 0;
  for await (const _ of client.readAfter({ sessionId: "big-log" })) n++;
  const streamSeconds = (Date.now() - t0) / 1000;
  const streaming = sampler.stop();
  log(`${t.kind}: streamed ${n} in ${streamSeconds.toFixed(1)} s, RSS idle ${mib(idle)} MiB peak ${mib(streaming.peak)} MiB`);

  // 1,000 idle followers, each on its own session, over 10 HTTP/2 connections.
  const before = rssBytes(pid);
  const clients = Array.from({ length: 10 }, () => grpcClient(EventLogService, server.address));
  const abort = new AbortController();
  setMaxListeners(0, abort.signal);
  let first = 0;
  let second = 0;
  const streams = Array.from({ length: IDLE_FOLLOWERS }, async (_, i) => {
    let k = 0;
    try {
      for await (const _ of clients[i % 10]!.readAfter({ sessionId: `idle-${i}`, follow: true }, { signal: abort.signal })) {
        if (++k === 1) first++;
        else second++;
      }
    } catch {
      // cancelled at the end
    }
  });
  while (first < IDLE_FOLLOWERS) await new Promise((r) => setTimeout(r, 50));
  await new Promise((r) => setTimeout(r, 1000));
  const parked = rssBytes(pid);
  const appender = rawGrpcClient(EventLogService, server.address);
  const wake = Date.now();
  await Promise.all(Array.from({ length: IDLE_FOLLOWERS }, (_, i) => rawUnary(appender, EventLogService.method.append, { sessionId: `idle-${i}`, event: { format: FORMAT, payload: eventPayload(i) } })));
  while (second < IDLE_FOLLOWERS) await new Promise((r) => setTimeout(r, 20));
  const wakeMs = Date.now() - wake;
  const afterWake = rssBytes(pid);
  abort.abort();
  await Promise.all(streams);
  appender.close();
  await server.stop();

  out.push(`\n### Memory on ${t.kind}\n`);
  out.push("| situation | server RSS MiB |");
  out.push("|---|---:|");
  out.push(`| idle, before streaming | ${mib(idle)} |`);
  out.push(`| peak while streaming ${n.toLocaleString("en")} events with ReadAfter (${fmt(n / streamSeconds)} records/s) | ${mib(streaming.peak)} |`);
  out.push(`| before opening followers | ${mib(before)} |`);
  out.push(`| ${IDLE_FOLLOWERS} idle followers parked | ${mib(parked)} |`);
  out.push(`| after one append to each of their sessions (all ${IDLE_FOLLOWERS} delivered in ${wakeMs} ms) | ${mib(afterWake)} |`);
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), "mecatl-bench-events-"));
  const redis = await spawnRedis();
  const targets: Target[] = [
    { kind: "sqlite", dir },
    { kind: "redis", redis },
  ];
  try {
    await floorBench();
    for (const t of targets) await appendBench(t);
    for (const t of targets) await followBench(t);
    for (const t of targets) await rssBench(t);
  } finally {
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  console.log(out.join("\n"));
}

await main();
