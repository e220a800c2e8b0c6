/**
 * Issue 11's table, every row from one interleaved run: this build against
 * the transport floor (bench/lib/floor-server.ts) and, optionally, against a
 * baseline build, on an SQLite file and on a durable redis-server
 * (`appendfsync always`), each build with a store of its own.
 *
 * 1. Load 1 KiB / Renew / Append at 64 calls in flight: throughput ÷ floor,
 *    and the server process's CPU per call ÷ the floor server's, split into
 *    its main thread (the event loop, ÷ the floor's main thread) and its
 *    other threads (the SQLite workers and V8's helper threads: garbage
 *    collection, compilation), read per thread from /proc.
 * 2. Load 1 KiB at 1 call in flight: p50 ÷ floor p50.
 * 3. Appends per fsync at 64 in flight: fsync + fdatasync calls of the
 *    process that syncs (the server on SQLite, redis-server on Redis),
 *    counted by `perf stat` during the Append case (bench/lib/fsync-count.ts).
 * 4. Renew p99 while 64 MiB Saves run in a loop, while 64 MiB Loads run in
 *    a loop (each from a child process, bench/lib/large-call-loop.ts; the
 *    snapshot the Loads read is saved once per server before any slice),
 *    and without them: one Renew sent every 5 ms (an open loop, latency from
 *    the moment it was due; see renewOpenLoop). The floor runs the same
 *    slices beside its own loops of 64 MiB `Sink`s and `Source`s: how much
 *    of the tail the transport (grpc-js and HTTP/2 carrying 64 MiB through
 *    one event loop) makes by itself.
 * 5. SQLite: append → follower p99 across two server processes on one file
 *    (append sent on one, record received by a follower on the other), one
 *    append at a time, 100–200 ms apart.
 *
 * On Redis, cases 1 and 2 also run the Redis floor: the floor server making
 * the one Redis command per call that the least Redis-backed server would
 * (a `GETRANGE` for Load, a `SET` for Renew and Append, on a redis-server of
 * its own with `appendfsync always`; bench/lib/floor-server.ts). Its ratios
 * to the floor show how much of a Redis row's distance from the floor is
 * the Redis round trip itself (and redis-server's share of the 2 cores),
 * which no server built on Redis can remove; the detailed table gives each
 * target ÷ the Redis floor as well.
 *
 * Targets alternate in slices (floor, Redis floor, this build, baseline;
 * then the other way round), so that load from other processes falls on all
 * alike.
 *
 * Run: npm run build && node dist/bench/call-path.js [calls] [backends] [baseline-main.js]
 *   calls: per small-call case at 64 in flight (default 10000); backends
 *   default sqlite,redis, or also sqlite-memory: the same server on
 *   `sqlite::memory:`, whose writes go through the same writer thread and
 *   group commits but touch no file and never fsync, so that its rows beside
 *   the SQLite file's show what durability itself costs per call (not a
 *   goal's row: it keeps nothing); baseline: another build's
 *   dist/services/server/main.js. BENCH_SLICE_SECONDS (default 3) sets the
 *   length of one Renew slice in case 4; BENCH_FOLLOW_APPENDS (default 300)
 *   the appends of case 5; BENCH_CASES (default 1,2,3,4,5) which cases run
 *   (3 comes with 1).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir, loadavg } from "node:os";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import type * as grpc from "@grpc/grpc-js";
import { EventLogService, ReadAfterRequestSchema, type ReadAfterResponse } from "../gen/mecatl/driver/v1/event_log_pb.js";
import { startServer, type ServerProcess } from "../test/helpers/server.js";
import { spawnRedis, type SpawnedRedis } from "../test/helpers/redis-server.js";
import { rawGrpcClient, rawUnary } from "../test/helpers/raw-grpc.js";
import { startTransportFloor, type TransportFloor } from "./lib/floor.js";
import { interleaved, mainThreadCpu, processCpu, Sample, type PhaseResult } from "./lib/interleave.js";
import { fmt } from "./lib/measure.js";
import { driverUnaryOps, floorUnaryOps, UNARY_CALLS, type Op } from "./lib/unary-ops.js";
import { countFsyncs } from "./lib/fsync-count.js";
import { saveLoadedSnapshot, startLargeCallLoop, type LargeCall } from "./lib/large-call-loop.js";

const CALLS = Number(process.argv[2] ?? 10_000);
const BACKENDS = (process.argv[3] ?? "sqlite,redis").split(",");
const BASELINE = process.argv[4];
const IN_FLIGHT = 64;
const SLICE = 2_000;
/** Loads at 1 in flight per target, in slices of 200. */
const SINGLE_CALLS = 3_000;
const SLICE_SECONDS = Number(process.env.BENCH_SLICE_SECONDS ?? 3);
/** Milliseconds between two Renews in case 4 (an open loop: see renewOpenLoop). */
const RENEW_EVERY_MS = 5;
/** Renew slices per target without large calls, with Saves and with Loads. */
const RENEW_SLICES = 4;
const FOLLOW_APPENDS = Number(process.env.BENCH_FOLLOW_APPENDS ?? 300);
const CASES = new Set((process.env.BENCH_CASES ?? "1,2,3,4,5").split(","));
/** As large as a Save can be (the Load answer must fit the harness's 64 MiB limit). */
const LARGE_SAVE_BYTES = 64 * 1024 * 1024 - 64;

/** A build under test: this one, or the baseline's `main.js`. */
interface Build {
  name: string;
  main: string | undefined;
}

/** One build serving one backend: its server, and the process that fsyncs its writes. */
interface Target {
  build: Build;
  server: ServerProcess;
  redis: SpawnedRedis | undefined;
  syncPid: number;
  ops: Record<string, Op>;
}

/** One line of the detailed table. */
interface Row {
  backend: string;
  case: string;
  target: string;
  result: PhaseResult;
  floor?: PhaseResult;
  /** The Redis floor's result in the same slices (Redis rows only). */
  redisFloor?: PhaseResult;
  appendsPerFsync?: number;
}

/** The Redis floor (bench/lib/floor-server.ts with a redis-server of its own, durable as the targets'), for the Redis rows. */
interface RedisFloor {
  floor: TransportFloor;
  redis: SpawnedRedis;
  ops: Record<string, Op>;
}

/** Spawns a durable redis-server (appendfsync always, as the targets') and the floor server on it; the caller stops both. */
async function startRedisFloor(): Promise<RedisFloor> {
  const redis = await spawnRedis();
  const floor = await startTransportFloor(redis.url);
  return { floor, redis, ops: floorUnaryOps(floor) };
}

/** The `--store` of a target on `backend` (see the file comment's backends); a redis-server of its own on Redis. */
async function startTarget(build: Build, backend: string, dir: string, index: number): Promise<Target> {
  const redis = backend === "redis" ? await spawnRedis() : undefined;
  const store = redis?.url ?? (backend === "sqlite-memory" ? "sqlite::memory:" : `sqlite:${join(dir, `store-${index}.sqlite`)}`);
  const server = await startServer(["all", "--store", store, "--lease-ttl", "1h", "--log-level", "warn"], { main: build.main });
  return { build, server, redis, syncPid: redis?.pid ?? server.proc.pid!, ops: await driverUnaryOps(server.address, IN_FLIGHT) };
}

/**
 * Sends one Renew every {@link RENEW_EVERY_MS} for `seconds`, whether or not
 * the ones before have been answered (an open loop), and adds to `sample`
 * each one's latency from the moment it was due: a stall of the server then
 * counts against every Renew that fell into it, as it would for a harness
 * renewing on a timer, not against one only (a closed loop, one call after
 * another, would send nothing during the stall and hide it from the p99).
 * Renews of one lease still follow each other: Renew `i` uses lease
 * `i % IN_FLIGHT` and waits for that lease's previous Renew.
 */
async function renewOpenLoop(sample: Sample, seconds: number, renew: Op): Promise<void> {
  const started = performance.now();
  const lanes: Array<Promise<unknown>> = Array.from({ length: IN_FLIGHT }, () => Promise.resolve());
  const calls: Array<Promise<unknown>> = [];
  for (let i = 0; ; i++) {
    const due = started + i * RENEW_EVERY_MS;
    if (due - started >= seconds * 1000) break;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const lane = i % IN_FLIGHT;
    const call = lanes[lane]!.then(() => renew(lane, i)).then(() => sample.latenciesMs.push(performance.now() - due));
    lanes[lane] = call;
    calls.push(call);
  }
  await Promise.all(calls);
  sample.seconds += (performance.now() - started) / 1000;
}

/** Renew latencies of one contender in case 4: without large calls, while 64 MiB Saves loop, while 64 MiB Loads loop. */
interface RenewUnderLarge {
  quiet: Sample;
  saving: Sample;
  loading: Sample;
  saves: number;
  loads: number;
}

/** A contender of case 4: a target, or the transport floor (its Renew a `Source` of a Renew answer's size, its Saves and Loads `Sink`s and `Source`s of 64 MiB). */
interface RenewContender {
  address: string;
  floor: boolean;
  renew: Op;
}

/**
 * Case 4: Renews in an open loop, in slices without large calls, with a
 * loop of 64 MiB Saves, and with a loop of 64 MiB Loads, alternating
 * between contenders (the floor first, then the targets).
 */
async function renewUnderLargeCalls(contenders: RenewContender[]): Promise<RenewUnderLarge[]> {
  const out = contenders.map((): RenewUnderLarge => ({ quiet: new Sample(), saving: new Sample(), loading: new Sample(), saves: 0, loads: 0 }));
  const beside = async (c: RenewContender, call: LargeCall, sample: Sample): Promise<number> => {
    const loop = startLargeCallLoop(c.address, LARGE_SAVE_BYTES, call, c.floor);
    await loop.started;
    await renewOpenLoop(sample, SLICE_SECONDS, c.renew);
    return loop.stop();
  };
  for (const c of contenders) if (!c.floor) await saveLoadedSnapshot(c.address, LARGE_SAVE_BYTES);
  // Lets the checkpoints and the space reclamation after those Saves finish (sqlite-maintenance.ts IDLE_MS is 1 s).
  await new Promise((r) => setTimeout(r, 3000));
  for (let slice = 0; slice < RENEW_SLICES; slice++) {
    const order = slice % 2 === 0 ? contenders.map((_, k) => k) : contenders.map((_, k) => contenders.length - 1 - k);
    for (const k of order) {
      const c = contenders[k]!;
      await renewOpenLoop(out[k]!.quiet, SLICE_SECONDS / 2, c.renew);
      out[k]!.saves += await beside(c, "save", out[k]!.saving);
      out[k]!.loads += await beside(c, "load", out[k]!.loading);
    }
  }
  return out;
}

async function followPair(build: Build, dir: string, index: number) {
  const store = `sqlite:${join(dir, `follow-${index}.sqlite`)}`;
  const [writer, reader] = await Promise.all([0, 1].map(() => startServer(["event-log", "--store", store, "--log-level", "warn"], { main: build.main })));
  const log = rawGrpcClient(EventLogService, writer!.address);
  const followClient = rawGrpcClient(EventLogService, reader!.address);
  const waiting = new Map<number, () => void>();
  const stream = (followClient as unknown as { readAfter(r: unknown): grpc.ClientReadableStream<ReadAfterResponse> }).readAfter(
    create(ReadAfterRequestSchema, { sessionId: "followed", follow: true }),
  );
  stream.on("data", (r: ReadAfterResponse) => {
    const seq = (JSON.parse(Buffer.from(r.event!.payload).toString("utf8")) as { seq: number }).seq;
    waiting.get(seq)?.();
  });
  stream.on("error", () => undefined);
  return {
    /** Appends record `seq`; resolves with the milliseconds until the follower received it, from the send and from the append's OK. */
    async append(seq: number): Promise<{ fromSend: number; fromOk: number }> {
      let receivedAt = 0;
      const received = new Promise<void>((resolve) => waiting.set(seq, () => resolve(void (receivedAt = performance.now()))));
      const t0 = performance.now();
      await rawUnary(log, EventLogService.method.append, { sessionId: "followed", event: { format: "eventlog-json/1", payload: Buffer.from(JSON.stringify({ seq })) } });
      const ok = performance.now();
      await received;
      waiting.delete(seq);
      return { fromSend: receivedAt - t0, fromOk: Math.max(0, receivedAt - ok) };
    },
    async stop() {
      stream.cancel();
      await Promise.all([writer!.stop(), reader!.stop()]);
    },
  };
}

/**
 * Case 5: append → follower latency, one append per build per round,
 * 100–200 ms between rounds; per build, latencies from the send and from the
 * append's OK (what the wake-up adds).
 */
async function followAcrossProcesses(builds: Build[], dir: string): Promise<Array<{ fromSend: Sample; fromOk: Sample }>> {
  const pairs = await Promise.all(builds.map((b, i) => followPair(b, dir, i)));
  const samples = builds.map(() => ({ fromSend: new Sample(), fromOk: new Sample() }));
  // A first append each, so that every follower has read the log and parked.
  for (const p of pairs) await p.append(-1);
  for (let seq = 0; seq < FOLLOW_APPENDS; seq++) {
    const order = seq % 2 === 0 ? pairs.map((_, k) => k) : pairs.map((_, k) => pairs.length - 1 - k);
    for (const k of order) {
      const r = await pairs[k]!.append(seq);
      samples[k]!.fromSend.latenciesMs.push(r.fromSend);
      samples[k]!.fromOk.latenciesMs.push(r.fromOk);
    }
    await new Promise((r) => setTimeout(r, 100 + Math.random() * 100));
  }
  for (const p of pairs) await p.stop();
  return samples;
}

async function main() {
  const builds: Build[] = [{ name: "this build", main: undefined }, ...(BASELINE === undefined ? [] : [{ name: "baseline", main: BASELINE }])];
  const floor = await startTransportFloor();
  const floorOps: Record<string, Op> = floorUnaryOps(floor);
  const dir = mkdtempSync(join(tmpdir(), "mecatl-call-path-"));
  const rows: Row[] = [];
  const renew: Array<{ backend: string; target: string; quiet: PhaseResult; saving: PhaseResult; loading: PhaseResult; saves: number; loads: number }> = [];
  const load0 = loadavg()[0]!;
  const log = (line: string) => process.stderr.write(`${line}\n`);

  for (const backend of CASES.has("1") || CASES.has("2") || CASES.has("4") ? BACKENDS : []) {
    const targets: Target[] = [];
    for (const [i, b] of builds.entries()) targets.push(await startTarget(b, backend, dir, i));
    const redisFloor = backend === "redis" && (CASES.has("1") || CASES.has("2")) ? await startRedisFloor() : undefined;
    // Contenders in every slice: the floor, the Redis floor on Redis, then the targets.
    const contenders = (call: string) => [floorOps[call]!, ...(redisFloor === undefined ? [] : [redisFloor.ops[call]!]), ...targets.map((t) => t.ops[call]!)];
    /** One slice run's summaries, split back into the floor's, the Redis floor's (if it ran) and the targets'. */
    const split = (all: PhaseResult[]) => ({ floor: all[0]!, redisFloor: redisFloor === undefined ? undefined : all[1], results: all.slice(redisFloor === undefined ? 1 : 2) });
    /** ", Redis floor <figure>" for the progress log, or nothing when the Redis floor did not run. */
    const redisFloorNote = (r: PhaseResult | undefined, figure: (r: PhaseResult) => string) => (r === undefined ? "" : `, Redis floor ${figure(r)}`);
    for (const call of CASES.has("1") ? UNARY_CALLS : []) {
      const pids = [floor.pid, ...(redisFloor === undefined ? [] : [redisFloor.floor.pid]), ...targets.map((t) => t.server.proc.pid!)];
      const fsyncs = call === "Append" ? await Promise.all(targets.map((t) => countFsyncs(t.syncPid))) : [];
      const { floor: floorResult, redisFloor: redisFloorResult, results } = split((await interleaved(contenders(call), IN_FLIGHT, CALLS, SLICE, pids.map((pid) => processCpu([pid], false)), pids.map(mainThreadCpu))).map((s) => s.summary()));
      const counted = await Promise.all(fsyncs.map((f) => f.stop()));
      for (const [k, result] of results.entries()) {
        const n = counted[k];
        rows.push({ backend, case: `${call}, 64 in flight`, target: targets[k]!.build.name, result, floor: floorResult, redisFloor: redisFloorResult, appendsPerFsync: n === undefined || n === 0 ? undefined : result.ops / n });
      }
      log(`${backend} ${call}: floor ${fmt(floorResult.opsPerSecond)}/s${redisFloorNote(redisFloorResult, (r) => `${fmt(r.opsPerSecond)}/s`)}, ${results.map((r, k) => `${targets[k]!.build.name} ${fmt(r.opsPerSecond)}/s`).join(", ")}`);
    }
    if (CASES.has("2")) {
      const { floor: floorResult, redisFloor: redisFloorResult, results } = split((await interleaved(contenders("Load 1 KiB"), 1, SINGLE_CALLS, 200)).map((s) => s.summary()));
      for (const [k, result] of results.entries()) rows.push({ backend, case: "Load 1 KiB, 1 in flight", target: targets[k]!.build.name, result, floor: floorResult, redisFloor: redisFloorResult });
      log(`${backend} Load at 1 in flight: floor p50 ${fmt(floorResult.p50Ms)} ms${redisFloorNote(redisFloorResult, (r) => `${fmt(r.p50Ms)} ms`)}, ${results.map((r, k) => `${targets[k]!.build.name} ${fmt(r.p50Ms)} ms`).join(", ")}`);
    }
    if (redisFloor !== undefined) {
      redisFloor.floor.stop();
      await redisFloor.redis.stop();
    }
    const renewContenders: Array<RenewContender & { name: string }> = [
      { name: "floor", address: floor.address, floor: true, renew: floorOps.Renew! },
      ...targets.map((t) => ({ name: t.build.name, address: t.server.address, floor: false, renew: t.ops.Renew! })),
    ];
    for (const [k, r] of (CASES.has("4") ? await renewUnderLargeCalls(renewContenders) : []).entries()) {
      const name = renewContenders[k]!.name;
      renew.push({ backend, target: name, quiet: r.quiet.summary(), saving: r.saving.summary(), loading: r.loading.summary(), saves: r.saves, loads: r.loads });
      log(`${backend} Renew p99 with 64 MiB Saves (${name}): ${fmt(r.saving.summary().p99Ms)} ms, with 64 MiB Loads ${fmt(r.loading.summary().p99Ms)} ms, without ${fmt(r.quiet.summary().p99Ms)} ms`);
    }
    for (const t of targets) {
      await t.server.stop();
      await t.redis?.stop();
    }
  }
  const follow = BACKENDS.includes("sqlite") && CASES.has("5") ? (await followAcrossProcesses(builds, dir)).map((s) => ({ fromSend: s.fromSend.summary(), fromOk: s.fromOk.summary() })) : [];
  floor.stop();
  rmSync(dir, { recursive: true, force: true });

  console.log(`call path (issue 11): ${CALLS} calls per case at ${IN_FLIGHT} in flight, node ${process.version}, load average (1 min) ${load0.toFixed(2)} at start, ${loadavg()[0]!.toFixed(2)} at end\n`);
  console.log("| backend | case | target | calls/s | ÷ floor calls/s | p50 ms | ÷ floor p50 | p99 ms | server CPU µs/call | ÷ floor CPU | main thread µs/call | ÷ floor's | other threads µs/call | floor's | appends per fsync |");
  console.log("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
  for (const r of rows) {
    const cpu = r.result.cpuMsPerOp * 1000;
    const floorCpu = (r.floor?.cpuMsPerOp ?? Number.NaN) * 1000;
    const main = r.result.mainThreadCpuMsPerOp * 1000;
    const floorMain = (r.floor?.mainThreadCpuMsPerOp ?? Number.NaN) * 1000;
    console.log(
      `| ${r.backend} | ${r.case} | ${r.target} | ${fmt(r.result.opsPerSecond)} | ${fmt(r.result.opsPerSecond / r.floor!.opsPerSecond, 2)} | ${fmt(r.result.p50Ms)} | ${fmt(r.result.p50Ms / r.floor!.p50Ms, 2)} | ${fmt(r.result.p99Ms)} | ${fmt(cpu)} | ${fmt(cpu / floorCpu, 2)} | ${fmt(main)} | ${fmt(main / floorMain, 2)} | ${fmt(cpu - main)} | ${fmt(floorCpu - floorMain)} | ${r.appendsPerFsync === undefined ? "" : fmt(r.appendsPerFsync)} |`,
    );
  }
  const withRedisFloor = rows.filter((r) => r.redisFloor !== undefined);
  if (withRedisFloor.length > 0) {
    // The Redis floor is a bare grpc-js server making one Redis command per call: what no Redis-backed server can go below.
    console.log("\n| backend | case | Redis floor calls/s | Redis floor ÷ floor calls/s | Redis floor ÷ floor p50 | Redis floor ÷ floor CPU | target | target ÷ Redis floor calls/s | ÷ Redis floor p50 | ÷ Redis floor CPU |");
    console.log("|---|---|---:|---:|---:|---:|---|---:|---:|---:|");
    for (const r of withRedisFloor) {
      const rf = r.redisFloor!;
      console.log(
        `| ${r.backend} | ${r.case} | ${fmt(rf.opsPerSecond)} | ${fmt(rf.opsPerSecond / r.floor!.opsPerSecond, 2)} | ${fmt(rf.p50Ms / r.floor!.p50Ms, 2)} | ${fmt(rf.cpuMsPerOp / r.floor!.cpuMsPerOp, 2)} | ${r.target} | ${fmt(r.result.opsPerSecond / rf.opsPerSecond, 2)} | ${fmt(r.result.p50Ms / rf.p50Ms, 2)} | ${fmt(r.result.cpuMsPerOp / rf.cpuMsPerOp, 2)} |`,
      );
    }
  }
  console.log("\n| backend | target | Renew p99 ms, 64 MiB Saves looping | Renew p99 ms, 64 MiB Loads looping | Renew p99 ms, without | Renew p50 ms, Saves / Loads / without | Saves / Loads completed |");
  console.log("|---|---|---:|---:|---:|---:|---:|");
  for (const r of renew) {
    console.log(`| ${r.backend} | ${r.target} | ${fmt(r.saving.p99Ms)} | ${fmt(r.loading.p99Ms)} | ${fmt(r.quiet.p99Ms)} | ${fmt(r.saving.p50Ms)} / ${fmt(r.loading.p50Ms)} / ${fmt(r.quiet.p50Ms)} | ${r.saves} / ${r.loads} |`);
  }
  if (follow.length > 0) {
    console.log("\n| target | append → follower across two processes, p50 / p99 ms from the send | p50 / p99 ms after the append's OK | appends |");
    console.log("|---|---:|---:|---:|");
    for (const [k, f] of follow.entries()) console.log(`| ${builds[k]!.name} | ${fmt(f.fromSend.p50Ms)} / ${fmt(f.fromSend.p99Ms)} | ${fmt(f.fromOk.p50Ms)} / ${fmt(f.fromOk.p99Ms)} | ${f.fromSend.ops} |`);
  }
  console.log("\nIssue 11's table (goal in brackets):\n");
  console.log(`| what | backend | ${builds.map((b) => b.name).join(" | ")} |`);
  console.log(`|---|---|${builds.map(() => "---:").join("|")}|`);
  const cell = (backend: string, build: Build, value: (r: Row) => number, case_: (c: string) => boolean) =>
    rows
      .filter((r) => r.backend === backend && r.target === build.name && case_(r.case))
      .map((r) => fmt(value(r), 2))
      .join(" / ");
  for (const backend of BACKENDS) {
    const small = (c: string) => c.endsWith("64 in flight");
    const line = (what: string, value: (b: Build) => string) => console.log(`| ${what} | ${backend} | ${builds.map(value).join(" | ")} |`);
    line("Load 1 KiB / Renew / Append, throughput ÷ floor [≥ 0.85 / 0.85 / 0.75]", (b) => cell(backend, b, (r) => r.result.opsPerSecond / r.floor!.opsPerSecond, small));
    line("server CPU per call ÷ floor's [≤ 1.5]", (b) => cell(backend, b, (r) => r.result.cpuMsPerOp / r.floor!.cpuMsPerOp, small));
    // The floor answers from memory on its event loop; a durable write adds threads the floor has none of (the SQLite writer).
    line("of which: main thread CPU per call ÷ floor's main thread (no goal)", (b) => cell(backend, b, (r) => r.result.mainThreadCpuMsPerOp / r.floor!.mainThreadCpuMsPerOp, small));
    line("of which: other threads' CPU µs per call, this build − floor (no goal: SQLite workers, V8 helper threads)", (b) =>
      cell(backend, b, (r) => (r.result.cpuMsPerOp - r.result.mainThreadCpuMsPerOp - (r.floor!.cpuMsPerOp - r.floor!.mainThreadCpuMsPerOp)) * 1000, small),
    );
    line("Load p50 at 1 in flight ÷ floor's [≤ 1.3]", (b) => cell(backend, b, (r) => r.result.p50Ms / r.floor!.p50Ms, (c) => c.endsWith("1 in flight")));
    if (backend === "redis") {
      // Every Redis row of cases 1 and 2 carries the Redis floor's result of its slices.
      const floorCell = (b: Build, value: (rf: PhaseResult, floor: PhaseResult) => number, case_: (c: string) => boolean) => cell(backend, b, (r) => value(r.redisFloor!, r.floor!), case_);
      line("Redis floor (one Redis command per call): throughput ÷ floor / CPU ÷ floor's, Load / Renew / Append; Load p50 at 1 in flight ÷ floor's", (b) =>
        [floorCell(b, (rf, f) => rf.opsPerSecond / f.opsPerSecond, small), floorCell(b, (rf, f) => rf.cpuMsPerOp / f.cpuMsPerOp, small), floorCell(b, (rf, f) => rf.p50Ms / f.p50Ms, (c) => c.endsWith("1 in flight"))].join("; "),
      );
    }
    line("appends per fsync at 64 in flight [≥ 10]", (b) => cell(backend, b, (r) => r.appendsPerFsync ?? Number.NaN, (c) => c.startsWith("Append")));
    const renewCell = (target: string) => {
      const r = renew.find((x) => x.backend === backend && x.target === target);
      return r === undefined ? "" : `${fmt(r.saving.p99Ms)} / ${fmt(r.loading.p99Ms)} / ${fmt(r.quiet.p99Ms)}`;
    };
    line("Renew p99 ms while 64 MiB Saves loop / while 64 MiB Loads loop / without [< 25]", (b) => renewCell(b.name));
    const floorRenew = renew.find((x) => x.backend === backend && x.target === "floor");
    if (floorRenew !== undefined) {
      // The floor is not paced to the targets: it completes several times as many large calls in the same slices.
      line("the floor's Renew p99 ms beside its own 64 MiB Sinks / Sources / without (no goal; large calls completed in brackets)", (b) => {
        const r = renew.find((x) => x.backend === backend && x.target === b.name);
        return `${renewCell("floor")} (${floorRenew.saves} / ${floorRenew.loads}; ${b.name}: ${r?.saves ?? "-"} / ${r?.loads ?? "-"})`;
      });
    }
  }
  if (follow.length > 0) console.log(`| append → follower p99 ms across two processes, from the send [≤ 20] | sqlite | ${follow.map((f) => fmt(f.fromSend.p99Ms)).join(" | ")} |`);
}

await main();
