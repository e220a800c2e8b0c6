/**
 * Session lease benchmark (issue 4): Acquire and Renew throughput and
 * p50/p99 latency with 10,000 leases renewed by 64 concurrent clients, on
 * each backend, over gRPC to a `serve session-lease` process and, in the
 * same run, against the raw store in-process (the same SessionLeaseStore the
 * server uses, without RPC), reported as a ratio.
 *
 *   npx tsc -p . && node dist/bench/session-lease.js [--leases 10000] [--clients 64] [--rounds 3] [--backends sqlite,redis]
 *
 * gRPC and raw run in alternating slices of 1,000 operations, so load from
 * other processes on a shared machine falls on both alike. "CPU ms/op" is the
 * CPU time of this process plus the server process per operation (the
 * redis-server's own CPU is not counted, on either path).
 *
 * Every operation must succeed (a granted lease, the same token on renew);
 * the benchmark stops with an error otherwise.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir, cpus, loadavg } from "node:os";
import { join } from "node:path";
import { execFileSync } from "node:child_process";
import { SessionLeaseService } from "../gen/mecatl/driver/v1/session_lease_pb.js";
import { SqliteDatabase } from "../services/storage/sqlite-database.js";
import { connectRedis } from "../services/storage/redis-connection.js";
import { RedisKeys } from "../services/storage/redis-keys.js";
import { DEFAULT_STORE_TIMEOUT_MS } from "../services/storage/backend.js";
import { SqliteSessionLeaseStore } from "../services/session-lease/sqlite.js";
import { RedisSessionLeaseStore } from "../services/session-lease/redis.js";
import { ttlMicros, type SessionLeaseStore } from "../services/session-lease/store.js";
import { spawnRedis } from "../test/helpers/redis-server.js";
import { startServer } from "../test/helpers/server.js";
import { rawGrpcClient, rawUnary } from "../test/helpers/raw-grpc.js";
import { interleaved, processCpu, type CpuMeter, type PhaseResult } from "./lib/interleave.js";
import { fmt } from "./lib/measure.js";

function flag(name: string, fallback: string): string {
  const i = process.argv.indexOf(name);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1]! : fallback;
}

const LEASES = Number(flag("--leases", "10000"));
const CLIENTS = Number(flag("--clients", "64"));
const ROUNDS = Number(flag("--rounds", "3"));
const BACKENDS = flag("--backends", "sqlite,redis").split(",");
/** Long enough that no lease expires during a run. */
const TTL_MS = 10 * 60_000;
const WARMUP = 1000;
/** Operations per slice when alternating between gRPC and raw. */
const SLICE = 1000;

/** One way to reach the leases: over gRPC or in-process. */
interface LeasePath {
  acquire(worker: number, sessionId: string, owner: string): Promise<bigint>;
  renew(worker: number, sessionId: string, owner: string, token: bigint): Promise<bigint>;
  close(): Promise<void>;
}

function rpcPath(address: string): LeasePath {
  // One connection per client, as CLIENTS harness processes would have.
  const clients = Array.from({ length: CLIENTS }, () => rawGrpcClient(SessionLeaseService, address, undefined, { "grpc.use_local_subchannel_pool": 1 }));
  const { acquire, renew } = SessionLeaseService.method;
  return {
    async acquire(w, sessionId, owner) {
      return (await rawUnary(clients[w]!, acquire, { sessionId, owner })).lease!.token;
    },
    async renew(w, sessionId, owner, token) {
      return (await rawUnary(clients[w]!, renew, { lease: { sessionId, owner, token } })).lease!.token;
    },
    async close() {
      for (const c of clients) c.close();
    },
  };
}

function rawPath(store: SessionLeaseStore): LeasePath {
  return {
    async acquire(_w, sessionId, owner) {
      const r = await store.acquire(sessionId, owner);
      if (r.outcome !== "granted") throw new Error(`acquire ${sessionId}: ${r.outcome}`);
      return r.hold.token;
    },
    async renew(_w, sessionId, owner, token) {
      const r = await store.renew(sessionId, owner, token);
      if (r.outcome !== "granted") throw new Error(`renew ${sessionId}: ${r.outcome} (${r.why})`);
      return r.hold.token;
    },
    async close() {},
  };
}

/**
 * Acquires LEASES leases with CLIENTS concurrent clients, then renews all of
 * them ROUNDS times, on every path in alternating slices of SLICE operations
 * (each path has its own store, so the same ids are used on each). Returns
 * the Acquire and Renew figures per path, in the order given.
 */
async function measure(paths: LeasePath[], cpu: CpuMeter): Promise<Array<{ acquire: PhaseResult; renew: PhaseResult }>> {
  const owner = (i: number) => `owner-${i % CLIENTS}`;
  await interleaved(
    paths.map((p) => (w, i) => p.acquire(w, `warm-${i}`, owner(i))),
    CLIENTS,
    WARMUP,
    WARMUP,
  );
  const tokens = paths.map(() => new Array<bigint>(LEASES));
  const acquire = await interleaved(
    paths.map((p, k) => async (w, i) => {
      tokens[k]![i] = await p.acquire(w, `lease-${i}`, owner(i));
    }),
    CLIENTS,
    LEASES,
    SLICE,
    cpu,
  );
  const renew = await interleaved(
    paths.map((p, k) => async (w, n) => {
      const i = n % LEASES;
      const token = await p.renew(w, `lease-${i}`, owner(i), tokens[k]![i]!);
      if (token !== tokens[k]![i]) throw new Error(`renew of lease-${i} changed the token`);
    }),
    CLIENTS,
    LEASES * ROUNDS,
    SLICE,
    cpu,
  );
  for (const p of paths) await p.close();
  return paths.map((_, k) => ({ acquire: acquire[k]!.summary(), renew: renew[k]!.summary() }));
}

interface Row {
  backend: string;
  path: "gRPC" | "raw";
  acquire: PhaseResult;
  renew: PhaseResult;
}

/**
 * Measures one backend: a `serve session-lease` process on `store` (gRPC)
 * against `raw`, the same store implementation in this process on a store of
 * its own.
 */
async function benchBackend(backend: string, store: string, raw: SessionLeaseStore): Promise<Row[]> {
  const server = await startServer(["session-lease", "--store", store, "--lease-ttl", `${TTL_MS}ms`]);
  try {
    const [viaRpc, inProcess] = await measure([rpcPath(server.address), rawPath(raw)], processCpu([server.proc.pid!]));
    return [
      { backend, path: "gRPC", ...viaRpc! },
      { backend, path: "raw", ...inProcess! },
    ];
  } finally {
    await server.stop();
  }
}

async function benchSqlite(): Promise<Row[]> {
  const dir = mkdtempSync(join(tmpdir(), "bench-lease-sqlite-"));
  const db = await SqliteDatabase.open({ path: join(dir, "raw.sqlite") });
  try {
    return await benchBackend("sqlite (file, synchronous=FULL)", `sqlite:${join(dir, "rpc.sqlite")}`, new SqliteSessionLeaseStore(db, ttlMicros(TTL_MS)));
  } finally {
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function benchRedis(): Promise<Row[]> {
  const redis = await spawnRedis();
  const client = await connectRedis({ url: redis.url });
  try {
    return await benchBackend("redis (appendfsync always)", redis.url, new RedisSessionLeaseStore(client, new RedisKeys("bench-raw:"), ttlMicros(TTL_MS), DEFAULT_STORE_TIMEOUT_MS));
  } finally {
    client.disconnect();
    await redis.stop();
  }
}

function report(rows: Row[]): void {
  const lines = [
    "| backend | path | op | ops | ops/s | p50 ms | p99 ms | CPU ms/op |",
    "|---|---|---|---:|---:|---:|---:|---:|",
  ];
  for (const r of rows) {
    for (const [op, p] of [["Acquire", r.acquire], ["Renew", r.renew]] as const) {
      lines.push(`| ${r.backend} | ${r.path} | ${op} | ${fmt(p.ops)} | ${fmt(p.opsPerSecond)} | ${fmt(p.p50Ms)} | ${fmt(p.p99Ms)} | ${p.cpuMsPerOp.toFixed(3)} |`);
    }
  }
  lines.push("", "| backend | op | gRPC / raw throughput |", "|---|---|---:|");
  for (const backend of [...new Set(rows.map((r) => r.backend))]) {
    const rpc = rows.find((r) => r.backend === backend && r.path === "gRPC")!;
    const raw = rows.find((r) => r.backend === backend && r.path === "raw")!;
    lines.push(`| ${backend} | Acquire | ${(rpc.acquire.opsPerSecond / raw.acquire.opsPerSecond).toFixed(2)} |`);
    lines.push(`| ${backend} | Renew | ${(rpc.renew.opsPerSecond / raw.renew.opsPerSecond).toFixed(2)} |`);
  }
  process.stdout.write(`${lines.join("\n")}\n`);
}

async function main(): Promise<void> {
  const redisVersion = execFileSync("redis-server", ["--version"], { encoding: "utf8" }).trim().split(" ").find((w) => w.startsWith("v="));
  process.stdout.write(
    `session lease benchmark: ${LEASES} leases, ${CLIENTS} concurrent clients, ${ROUNDS} renew rounds; node ${process.version}, ${cpus().length} cores, redis ${redisVersion}; load average (1 min) at start ${loadavg()[0]!.toFixed(2)}\n\n`,
  );
  const rows: Row[] = [];
  if (BACKENDS.includes("sqlite")) rows.push(...(await benchSqlite()));
  if (BACKENDS.includes("redis")) rows.push(...(await benchRedis()));
  report(rows);
  process.stdout.write(`\nload average (1 min) at the end: ${loadavg()[0]!.toFixed(2)}\n`);
}

await main();
