/**
 * SessionStoreService benchmark (issue 2): unary Load of a 1 KiB snapshot and
 * Save of 1 KiB and 1 MiB snapshots, at 1 and 64 calls in flight, on an
 * SQLite file and on a spawned durable redis-server, beside
 *  - the transport floor: a bare grpc-js server answering the same message
 *    shapes with no work (bench/lib/floor-server.ts), and
 *  - the raw backend doing the same durable write in-process with no RPC
 *    (better-sqlite3 with WAL + synchronous=FULL, one transaction per write;
 *    ioredis HSET against the same appendfsync-always Redis).
 * Every figure comes from one run on one machine; compare them as ratios.
 *
 * Run: npm run build && node dist/bench/session-store.js [seconds-per-case]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { SessionStoreService } from "../gen/mecatl/driver/v1/session_store_pb.js";
import { startServer } from "../test/helpers/server.js";
import { spawnRedis } from "../test/helpers/redis-server.js";
import { rawGrpcClient, rawUnary } from "../test/helpers/raw-grpc.js";
import { startTransportFloor } from "./lib/floor.js";
import { measure, fmt, type RunResult } from "./lib/measure.js";

const seconds = Number(process.argv[2] ?? 2);
const KiB = 1024;
const MiB = 1024 * 1024;
const cases = [
  { name: "Load 1 KiB", kind: "load" as const, size: KiB },
  { name: "Save 1 KiB", kind: "save" as const, size: KiB },
  { name: "Save 1 MiB", kind: "save" as const, size: MiB },
];
const concurrency = [1, 64];
const IDS = 1000;

type Op = (kind: "load" | "save", size: number) => (i: number) => Promise<unknown>;
const rows: Array<{ target: string; caseName: string; inFlight: number; r: RunResult }> = [];

/**
 * Runs every case against every target, case by case (all targets for one
 * case back to back), so that load drifting on a shared machine hits every
 * target of a ratio alike.
 */
async function runAll(targets: Array<{ name: string; op: Op }>) {
  for (const c of cases) {
    for (const inFlight of concurrency) {
      for (const t of targets) {
        const r = await measure(t.op(c.kind, c.size), inFlight, seconds * 1000);
        rows.push({ target: t.name, caseName: c.name, inFlight, r });
        process.stderr.write(`${t.name.padEnd(22)} ${c.name} x${inFlight}: ${fmt(r.perSecond)}/s p50 ${fmt(r.p50Ms)} ms p99 ${fmt(r.p99Ms)} ms\n`);
      }
    }
  }
}

function payloadOf(size: number): Buffer {
  return Buffer.alloc(size, 0x61);
}

async function driverOps(address: string): Promise<Op> {
  const client = rawGrpcClient(SessionStoreService, address);
  for (let i = 0; i < IDS; i++) {
    await rawUnary(client, SessionStoreService.method.save, { sessionId: `bench-${i}`, snapshot: { format: "sessnap-json/1", payload: payloadOf(KiB) } });
  }
  return (kind, size) => {
    const snapshot = { format: "sessnap-json/1", payload: payloadOf(size) };
    return kind === "load"
      ? (i) => rawUnary(client, SessionStoreService.method.load, { sessionId: `bench-${i % IDS}` })
      : (i) => rawUnary(client, SessionStoreService.method.save, { sessionId: `save-${i % IDS}`, snapshot });
  };
}

async function main() {
  const floor = await startTransportFloor();
  const dir = mkdtempSync(join(tmpdir(), "mecatl-bench-"));
  const raw = new Database(join(dir, "raw.sqlite"));
  raw.pragma("journal_mode = WAL");
  raw.pragma("synchronous = FULL");
  raw.exec("CREATE TABLE s (id TEXT PRIMARY KEY, format TEXT, payload BLOB, t INTEGER) STRICT");
  const put = raw.prepare("INSERT INTO s VALUES (?, 'sessnap-json/1', ?, ?) ON CONFLICT (id) DO UPDATE SET payload = excluded.payload, t = excluded.t");
  const get = raw.prepare("SELECT format, payload FROM s WHERE id = ?");
  for (let i = 0; i < IDS; i++) put.run(`bench-${i}`, payloadOf(KiB), Date.now());
  const sqliteServer = await startServer(["session-store", "--store", `sqlite:${join(dir, "driver.sqlite")}`, "--log-level", "warn"]);
  const redis = await spawnRedis();
  const rc = redis.client();
  for (let i = 0; i < IDS; i++) await rc.hset(`raw:bench-${i}`, "format", "sessnap-json/1", "payload", payloadOf(KiB));
  const redisServer = await startServer(["session-store", "--store", redis.url, "--log-level", "warn"]);

  await runAll([
    { name: "grpc-js floor", op: (kind, size) => {
      const bytes = payloadOf(size);
      return kind === "load" ? () => floor.source(size) : () => floor.sink(bytes);
    } },
    { name: "raw sqlite (no RPC)", op: (kind, size) => {
      const bytes = payloadOf(size);
      return kind === "load" ? async (i) => get.get(`bench-${i % IDS}`) : async (i) => put.run(`save-${i % IDS}`, bytes, Date.now());
    } },
    { name: "driver on sqlite", op: await driverOps(sqliteServer.address) },
    { name: "raw redis (no RPC)", op: (kind, size) => {
      const bytes = payloadOf(size);
      return kind === "load" ? (i) => rc.hgetBuffer(`raw:bench-${i % IDS}`, "payload") : (i) => rc.hset(`raw:save-${i % IDS}`, "format", "sessnap-json/1", "payload", bytes);
    } },
    { name: "driver on redis", op: await driverOps(redisServer.address) },
  ]);

  floor.stop();
  raw.close();
  rc.disconnect();
  await sqliteServer.stop();
  await redisServer.stop();
  await redis.stop();
  rmSync(dir, { recursive: true, force: true });

  const floorOf = (caseName: string, inFlight: number) => rows.find((x) => x.target === "grpc-js floor" && x.caseName === caseName && x.inFlight === inFlight)!.r;
  const rawOf = (target: string, caseName: string, inFlight: number) =>
    rows.find((x) => x.target === (target.includes("sqlite") ? "raw sqlite (no RPC)" : "raw redis (no RPC)") && x.caseName === caseName && x.inFlight === inFlight)!.r;
  console.log("| target | case | in flight | calls/s | p50 ms | p99 ms | ÷ floor calls/s | ÷ raw backend calls/s |");
  console.log("|---|---|---:|---:|---:|---:|---:|---:|");
  for (const x of rows) {
    const vsFloor = x.r.perSecond / floorOf(x.caseName, x.inFlight).perSecond;
    const vsRaw = x.target.startsWith("driver") ? fmt(x.r.perSecond / rawOf(x.target, x.caseName, x.inFlight).perSecond, 2) : "";
    console.log(`| ${x.target} | ${x.caseName} | ${x.inFlight} | ${fmt(x.r.perSecond)} | ${fmt(x.r.p50Ms)} | ${fmt(x.r.p99Ms)} | ${fmt(vsFloor, 2)} | ${vsRaw} |`);
  }
}

await main();
