/**
 * Bounded answers benchmark (issue 10), comparing two builds of the server
 * in one run: a baseline (today's main, built elsewhere) and this checkout.
 *
 *  - ListSchedules over 1,000,000 stored schedules (the 64 MiB answer limit
 *    is passed after ~70,000): server RSS growth (peak during the call minus
 *    before it), server CPU time and wall time, and the status answered.
 *  - List over 100,000 stored sessions (the answer fits): RSS growth per
 *    entry, CPU and wall time. With `--sessions 1500000` the answer is just
 *    under the 64 MiB limit (ids of 24 bytes: 42 encoded bytes an entry);
 *    with `--sessions 2000000` it is refused after ~1,598,000.
 *
 * Both on an SQLite file and on a spawned durable redis-server. The stores
 * are seeded directly (one SQLite transaction; Redis pipelines), in the
 * layout of both builds (on Redis the schedule name index is written both as
 * the baseline's set and as this build's sorted set), then each build's
 * server is started on them in turn.
 *
 * Run (after `npx tsc -p tsconfig.json`; build the baseline as RESULTS.md says):
 *   node dist/bench/bounded-answers.js --baseline /tmp/bounded-baseline/dist/services/server/main.js
 * Options: --schedules N (1000000) --sessions N (100000) --backends sqlite,redis
 *   --calls ListSchedules,List (which calls to measure)
 * A List near the limit, on SQLite only:
 *   node dist/bench/bounded-answers.js --baseline ... --schedules 0 --sessions 1500000 --backends sqlite --calls List
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import Database from "better-sqlite3";
import type { Redis } from "ioredis";
import { ScheduleStoreService } from "../gen/mecatl/driver/v1/schedule_store_pb.js";
import { SessionStoreService } from "../gen/mecatl/driver/v1/session_store_pb.js";
import { closeBackend, openBackend } from "../services/storage/backend.js";
import { RedisKeys } from "../services/storage/redis-keys.js";
import { dueIndexKey } from "../services/schedule-store/rules.js";
import { encodeState, parseSchedule, payloadText } from "../services/schedule-store/schedule.js";
import { MAIN, startServer } from "../test/helpers/server.js";
import { spawnRedis } from "../test/helpers/redis-server.js";
import { rawGrpcClient, rawUnary } from "../test/helpers/raw-grpc.js";
import { iso, scheduleRecord, T0 } from "../test/helpers/schedules.js";
import { mib, rssBytes, sampleRss } from "../test/helpers/rss.js";

const { values: opts } = parseArgs({
  options: {
    baseline: { type: "string" },
    schedules: { type: "string", default: "1000000" },
    sessions: { type: "string", default: "100000" },
    backends: { type: "string", default: "sqlite,redis" },
    calls: { type: "string", default: "ListSchedules,List" },
  },
});
const SCHEDULES = Number(opts.schedules);
const SESSIONS = Number(opts.sessions);
const CALLS = opts.calls!.split(",") as Array<"ListSchedules" | "List">;
const builds = [...(opts.baseline === undefined ? [] : [{ name: "baseline", main: opts.baseline }]), { name: "this build", main: MAIN }];

/** A schedule of this shape, as the store keeps it (~965 bytes as ListSchedules answers it). */
function storedSchedule(i: number) {
  const name = `sched-${String(i).padStart(7, "0")}`;
  const doc = parseSchedule(payloadText(scheduleRecord({ Name: name, Prompt: "summarise yesterday's incidents and open a ticket for each unresolved one" }, { NextFireAt: iso(T0 + 86_400 + i), Enabled: true }).payload));
  return { doc, state: encodeState(doc.state), due: dueIndexKey(doc) };
}

/** Seeds `n` schedules and `sessions` sessions into a fresh SQLite file (schema from this build's migrations). */
async function seedSqlite(path: string, n: number, sessions: number): Promise<void> {
  await closeBackend(await openBackend({ store: `sqlite:${path}` }));
  const db = new Database(path);
  db.pragma("journal_mode = WAL");
  const insertSchedule = db.prepare(`INSERT INTO schedules (name, spec, placement_owned, max_fires, state, due_ms) VALUES (?, ?, 0, 0, ?, ?)`);
  const insertSession = db.prepare(`INSERT INTO sessions (session_id, format, payload, modified_us) VALUES (?, 'sessnap-json/1', ?, ?)`);
  const payload = Buffer.from("{}");
  db.transaction(() => {
    for (let i = 0; i < n; i++) {
      const { doc, state, due } = storedSchedule(i);
      insertSchedule.run(doc.name, doc.specText, state, due ?? null);
    }
    for (let i = 0; i < sessions; i++) insertSession.run(sessionId(i), payload, Date.now() * 1000 + i);
  })();
  db.close();
}

/** Seeds the same into Redis, in both builds' layouts, with pipelines of 2,000 entries. */
async function seedRedis(redis: Redis, n: number, sessions: number): Promise<void> {
  const keys = new RedisKeys("mecatl-drivers:");
  const baselineNameIndex = `${keys.base}schedules`;
  const payload = Buffer.from("{}");
  for (let from = 0; from < Math.max(n, sessions); from += 2000) {
    const p = redis.pipeline();
    for (let i = from; i < Math.min(from + 2000, n); i++) {
      const { doc, state, due } = storedSchedule(i);
      p.hset(keys.schedule(doc.name), { ver: "1", spec: doc.specText, owned: "0", max_fires: "0", state });
      p.sadd(baselineNameIndex, doc.name);
      const part = keys.layout.partitionOf(doc.name);
      p.zadd(keys.scheduleIndex(part), 0, doc.name);
      if (due !== undefined) p.zadd(keys.scheduleDueIndex(part), due.toString(), doc.name);
    }
    for (let i = from; i < Math.min(from + 2000, sessions); i++) {
      const us = Date.now() * 1000 + i;
      p.hset(keys.snapshot(sessionId(i)), { format: "sessnap-json/1", payload, modified_us: String(us) });
      p.zadd(keys.sessionIndexOf(sessionId(i)), us, sessionId(i));
    }
    for (const [err] of (await p.exec()) ?? []) if (err) throw err;
  }
}

function sessionId(i: number): string {
  return `session-${String(i).padStart(7, "0")}-0c7f4a9e`;
}

/** CPU seconds (user + system) the process `pid` has used. */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

interface Measured {
  build: string;
  backend: string;
  call: string;
  outcome: string;
  rssGrowth: number;
  cpu: number;
  wall: number;
  entries: number;
}
const rows: Measured[] = [];

/** Starts `build` on `store`, makes one call, and records the server's RSS growth, CPU and wall time. */
async function measureCall(build: { name: string; main: string }, backend: string, store: string, call: "ListSchedules" | "List"): Promise<void> {
  const server = await startServer([call === "List" ? "session-store" : "schedule-store", "--store", store], { main: build.main });
  const pid = server.proc.pid!;
  try {
    const service = call === "List" ? SessionStoreService : ScheduleStoreService;
    const client = rawGrpcClient(service, server.address);
    // One small call first, so the baseline RSS includes a warmed-up connection and handler.
    if (call === "List") await rawUnary(client, SessionStoreService.method.load, { sessionId: sessionId(0) });
    else await rawUnary(client, ScheduleStoreService.method.loadSchedule, { name: "sched-0000000" });
    const before = rssBytes(pid);
    const cpu0 = cpuSeconds(pid);
    const sampler = sampleRss(pid, 20);
    const t0 = process.hrtime.bigint();
    let outcome: string;
    let entries = 0;
    try {
      const answer =
        call === "List"
          ? (await rawUnary(client, SessionStoreService.method.list, {})).sessions
          : (await rawUnary(client, ScheduleStoreService.method.listSchedules, {})).schedules;
      entries = answer.length;
      outcome = `OK, ${entries} entries`;
    } catch (err) {
      const e = err as { code?: number; details?: string };
      outcome = `code ${e.code}: ${(e.details ?? String(err)).slice(0, 160)}`;
    }
    const wall = Number(process.hrtime.bigint() - t0) / 1e9;
    const { peak } = sampler.stop();
    rows.push({ build: build.name, backend, call, outcome, rssGrowth: peak - before, cpu: cpuSeconds(pid) - cpu0, wall, entries });
    const last = rows.at(-1)!;
    console.error(`${build.name} ${backend} ${call}: +${mib(last.rssGrowth)} MiB RSS, ${last.cpu.toFixed(2)} s CPU, ${wall.toFixed(2)} s wall; ${outcome}`);
    client.close();
  } finally {
    await server.kill();
  }
}

async function main(): Promise<void> {
  for (const backend of opts.backends!.split(",")) {
    let store: string;
    let cleanup: () => Promise<void>;
    const t = Date.now();
    if (backend === "sqlite") {
      const dir = mkdtempSync(join(tmpdir(), "mecatl-bench-bounded-"));
      store = `sqlite:${join(dir, "store.sqlite")}`;
      await seedSqlite(join(dir, "store.sqlite"), SCHEDULES, SESSIONS);
      cleanup = async () => rmSync(dir, { recursive: true, force: true });
    } else {
      const server = await spawnRedis();
      const redis = server.client();
      await seedRedis(redis, SCHEDULES, SESSIONS);
      redis.disconnect();
      store = server.url;
      cleanup = () => server.stop();
    }
    console.error(`${backend}: seeded ${SCHEDULES} schedules and ${SESSIONS} sessions in ${((Date.now() - t) / 1000).toFixed(1)} s`);
    for (const build of builds) for (const call of CALLS) await measureCall(build, backend, store, call);
    await cleanup();
  }

  console.log(`\n| backend | call | build | answered | server RSS growth MiB | RSS bytes per entry | server CPU s | wall s |`);
  console.log(`|---|---|---|---|---:|---:|---:|---:|`);
  for (const r of rows) {
    const perEntry = r.call === "List" ? (r.rssGrowth / SESSIONS).toFixed(0) : "";
    console.log(`| ${r.backend} | ${r.call} over ${(r.call === "List" ? SESSIONS : SCHEDULES).toLocaleString("en-US")} | ${r.build} | ${r.outcome.replace(/\|/g, "/")} | ${mib(r.rssGrowth)} | ${perEntry} | ${r.cpu.toFixed(2)} | ${r.wall.toFixed(2)} |`);
  }
  if (builds.length === 2) {
    console.log(`\n| backend | call | RSS growth this/baseline | CPU this/baseline | wall this/baseline |`);
    console.log(`|---|---|---:|---:|---:|`);
    for (const r of rows.filter((x) => x.build === "this build")) {
      const b = rows.find((x) => x.build === "baseline" && x.backend === r.backend && x.call === r.call)!;
      console.log(`| ${r.backend} | ${r.call} | ${(r.rssGrowth / b.rssGrowth).toFixed(3)} | ${(r.cpu / b.cpu).toFixed(3)} | ${(r.wall / b.wall).toFixed(3)} |`);
    }
  }
}

await main();
