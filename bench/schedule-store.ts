/**
 * ScheduleStoreService benchmark (issue 5), on an SQLite file and on a
 * spawned durable redis-server:
 *  - DueSchedules over 100,000 schedules of which 100 are due, through the
 *    driver (gRPC), beside the same store called in-process (no RPC), and
 *    beside an in-process full scan (List + the due filter: what a store
 *    without a next-fire index must do on every tick);
 *  - ClaimSchedule under contention: rounds of 500 due schedules, each claimed
 *    by 4 racers at the same `now` (2,000 calls, 64 in flight, shuffled),
 *    through the driver and in-process; exactly one claim per schedule wins.
 * Every figure comes from one run on one machine; compare them as ratios.
 *
 * Run: npm run build && node dist/bench/schedule-store.js [seconds-per-case] [schedules]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ScheduleStoreService } from "../gen/mecatl/driver/v1/schedule_store_pb.js";
import { startServer } from "../test/helpers/server.js";
import { spawnRedis } from "../test/helpers/redis-server.js";
import { rawGrpcClient, rawUnary } from "../test/helpers/raw-grpc.js";
import { iso, scheduleRecord, T0, ts } from "../test/helpers/schedules.js";
import { closeBackend, openBackend } from "../services/storage/backend.js";
import { openScheduleStore } from "../services/schedule-store/open.js";
import { isDue } from "../services/schedule-store/rules.js";
import { parseSchedule, payloadText } from "../services/schedule-store/schedule.js";
import type { ScheduleStore } from "../services/schedule-store/store.js";
import { fmt, measure, quantile, type RunResult } from "./lib/measure.js";

const seconds = Number(process.argv[2] ?? 3);
const SCHEDULES = Number(process.argv[3] ?? 100_000);
const DUE = 100;
const CLAIM_ROUNDS = 3;
const SLOTS_PER_ROUND = 500;
const RACERS = 4;
const NS = 1_000_000_000n;

/** A realistic schedule: a Go-shaped Spec (~700 bytes of JSON) with a NextFireAt. */
function record(name: string, nextFireSec: number) {
  return scheduleRecord({ Name: name, Prompt: "summarise yesterday's incidents and open a ticket for each unresolved one", FireTimeout: 1_800_000_000_000, CreatedAt: iso(T0 - 86_400) }, { NextFireAt: iso(nextFireSec), Enabled: true });
}

/** Runs every op once with `inFlight` callers; returns latencies (ms, sorted), wall seconds and fulfilled count. */
async function runBatch(ops: Array<() => Promise<unknown>>, inFlight: number) {
  let next = 0;
  let ok = 0;
  const latencies: number[] = [];
  const start = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < ops.length) {
        const op = ops[next++]!;
        const t = process.hrtime.bigint();
        const fulfilled = await op().then(() => true, () => false);
        latencies.push(Number(process.hrtime.bigint() - t) / 1e6);
        if (fulfilled) ok++;
      }
    }),
  );
  latencies.sort((a, b) => a - b);
  return { latencies, seconds: Number(process.hrtime.bigint() - start) / 1e9, ok };
}

/** Every entry of a store scan. */
async function drain<T>(entries: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const e of entries) out.push(e);
  return out;
}

function shuffle<T>(xs: T[]): T[] {
  for (let i = xs.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [xs[i], xs[j]] = [xs[j]!, xs[i]!];
  }
  return xs;
}

interface Row {
  backend: string;
  what: string;
  r: RunResult;
  note?: string;
}
const rows: Row[] = [];

function report(row: Row) {
  rows.push(row);
  process.stderr.write(`${row.backend.padEnd(7)} ${row.what.padEnd(44)} ${fmt(row.r.perSecond)}/s p50 ${fmt(row.r.p50Ms)} ms p99 ${fmt(row.r.p99Ms)} ms ${row.note ?? ""}\n`);
}

/** The contention rounds: `claim(name, now)` resolves on a won claim and rejects on NOT_FOUND. */
async function claimRounds(backend: string, what: string, prefix: string, save: (name: string, at: number) => Promise<unknown>, claim: (name: string, now: number) => Promise<unknown>) {
  const all: number[] = [];
  let wall = 0;
  let won = 0;
  for (let round = 0; round < CLAIM_ROUNDS; round++) {
    const now = T0 + 1000 + round;
    const names = Array.from({ length: SLOTS_PER_ROUND }, (_, i) => `${prefix}-${round}-${i}`);
    await runBatch(names.map((n) => () => save(n, now)), 64);
    const ops = shuffle(names.flatMap((n) => Array.from({ length: RACERS }, () => () => claim(n, now))));
    const b = await runBatch(ops, 64);
    if (b.ok !== SLOTS_PER_ROUND) throw new Error(`${backend} ${what}: ${b.ok} claims won in round ${round}, expected ${SLOTS_PER_ROUND}`);
    all.push(...b.latencies);
    wall += b.seconds;
    won += b.ok;
  }
  all.sort((a, b) => a - b);
  report({ backend, what, r: { calls: all.length, seconds: wall, perSecond: all.length / wall, p50Ms: quantile(all, 0.5), p99Ms: quantile(all, 0.99) }, note: `(${fmt(won / wall)} won/s, exactly one per slot)` });
}

async function bench(backend: string, store: string) {
  const server = await startServer(["schedule-store", "--store", store]);
  const client = rawGrpcClient(ScheduleStoreService, server.address);
  const save = (name: string, at: number) => rawUnary(client, ScheduleStoreService.method.saveSchedule, { name, schedule: record(name, at) });

  // Seed: DUE schedules due at T0, the rest a day or more later.
  const seedOps = Array.from({ length: SCHEDULES }, (_, i) => () => save(`sched-${String(i).padStart(6, "0")}`, i < DUE ? T0 - i : T0 + 86_400 + i));
  const seeded = await runBatch(seedOps, 128);
  if (seeded.ok !== SCHEDULES) throw new Error(`${backend}: only ${seeded.ok} of ${SCHEDULES} saves succeeded`);
  report({ backend, what: `SaveSchedule (seeding ${SCHEDULES}, 128 in flight)`, r: { calls: SCHEDULES, seconds: seeded.seconds, perSecond: SCHEDULES / seeded.seconds, p50Ms: quantile(seeded.latencies, 0.5), p99Ms: quantile(seeded.latencies, 0.99) } });

  const due = await rawUnary(client, ScheduleStoreService.method.dueSchedules, { now: ts(T0) });
  if (due.schedules.length !== DUE) throw new Error(`${backend}: Due returned ${due.schedules.length}, expected ${DUE}`);
  if (!due.schedules.every((r) => isDue(parseSchedule(payloadText(r.payload)), BigInt(T0) * NS))) throw new Error(`${backend}: Due returned a schedule that is not due`);
  report({ backend, what: "DueSchedules via gRPC (1 in flight)", r: await measure(() => rawUnary(client, ScheduleStoreService.method.dueSchedules, { now: ts(T0) }), 1, seconds * 1000) });

  const local = await openBackend({ store, redis: { durability: "strict" } });
  const inProcess: ScheduleStore = openScheduleStore(local);
  report({ backend, what: "Due in-process, no RPC (1 in flight)", r: await measure(() => drain(inProcess.scanDue(BigInt(T0) * NS)), 1, seconds * 1000) });
  report({
    backend,
    what: "full scan in-process: List + due filter",
    r: await measure(async () => (await drain(inProcess.scan())).filter((s) => isDue(s, BigInt(T0) * NS)), 1, seconds * 1000, 0),
  });

  await claimRounds(backend, "ClaimSchedule via gRPC, 4 racers/slot", "grpc", save, (name, now) =>
    rawUnary(client, ScheduleStoreService.method.claimSchedule, { name, now: ts(now), nextFire: ts(now + 60) }),
  );
  await claimRounds(
    backend,
    "claim in-process, no RPC, 4 racers/slot",
    "local",
    (name, at) => inProcess.mutate({ kind: "save", schedule: parseSchedule(payloadText(record(name, at).payload)) }),
    async (name, now) => {
      const reply = await inProcess.mutate({ kind: "claim", name, now: BigInt(now) * NS, nextFire: BigInt(now + 60) * NS, checkDue: true });
      if (!reply.ok) throw new Error(reply.error);
    },
  );
  await closeBackend(local);
  client.close();
  await server.stop();
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), "mecatl-bench-schedules-"));
  await bench("sqlite", `sqlite:${join(dir, "schedules.sqlite")}`);
  const redis = await spawnRedis();
  await bench("redis", redis.url);
  await redis.stop();
  rmSync(dir, { recursive: true, force: true });

  const perSecond = (backend: string, prefix: string) => rows.find((x) => x.backend === backend && x.what.startsWith(prefix))!.r.perSecond;
  console.log("| backend | case | calls/s | p50 ms | p99 ms | note |");
  console.log("|---|---|---:|---:|---:|---|");
  for (const x of rows) console.log(`| ${x.backend} | ${x.what} | ${fmt(x.r.perSecond)} | ${fmt(x.r.p50Ms)} | ${fmt(x.r.p99Ms)} | ${x.note ?? ""} |`);
  console.log("\n| backend | Due gRPC ÷ Due in-process | Due in-process ÷ full scan | Claim gRPC ÷ claim in-process |");
  console.log("|---|---:|---:|---:|");
  for (const b of ["sqlite", "redis"]) {
    const dueRpc = perSecond(b, "DueSchedules via gRPC");
    const dueLocal = perSecond(b, "Due in-process");
    const scan = perSecond(b, "full scan");
    console.log(`| ${b} | ${fmt(dueRpc / dueLocal, 2)} | ${fmt(dueLocal / scan, 3)} | ${fmt(perSecond(b, "ClaimSchedule via gRPC") / perSecond(b, "claim in-process"), 2)} |`);
  }
}

await main();
