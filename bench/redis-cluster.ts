/**
 * Redis Cluster benchmark (issue 13): Append and Renew throughput on a
 * cluster of 1 primary against one of 3 primaries (each primary with one
 * replica, `appendfsync always`), and the cost of `--redis-wait-replicas 1`
 * (WAIT 1 after every write) on the 3-primary cluster.
 *
 *   npx tsc -p . && node dist/bench/redis-cluster.js [--ops 6000] [--clients 64] [--slice 500]
 *
 * Two paths per configuration: through the driver (`serve event-log
 * session-lease` on the cluster, one gRPC connection per client), and the
 * store in this process (the same RedisEventLogStore and
 * RedisSessionLeaseStore on a cluster client, no RPC), which shows what the
 * cluster itself does. Every configuration runs in alternating slices of
 * `--slice` operations, in one run, so load from other processes on a shared
 * machine falls on all alike. "CPU ms/op" is the CPU time, per operation, of
 * this process, the server process (driver path) and every redis-server of
 * the configuration's cluster: on one machine a cluster cannot be faster than
 * its CPUs, so the ratio of throughputs says little about a cluster of real
 * machines, while the CPU each call costs, and where it goes, says more.
 *
 * Appends are 1 KiB events on 256 sessions; Renews cycle over 256 held
 * leases. Every operation must succeed; the benchmark stops otherwise.
 */
import { execFileSync } from "node:child_process";
import { cpus, loadavg } from "node:os";
import { EventLogService } from "../gen/mecatl/driver/v1/event_log_pb.js";
import { SessionLeaseService } from "../gen/mecatl/driver/v1/session_lease_pb.js";
import { connectRedisCluster } from "../services/storage/redis-cluster.js";
import { RedisKeys } from "../services/storage/redis-keys.js";
import { setReplicaWait } from "../services/storage/redis-replicas.js";
import { RedisEventLogStore } from "../services/event-log/redis.js";
import { RedisSessionLeaseStore } from "../services/session-lease/redis.js";
import { ttlMicros } from "../services/session-lease/store.js";
import { spawnCluster, type SpawnedCluster } from "../test/helpers/redis-cluster.js";
import { startServer, type ServerProcess } from "../test/helpers/server.js";
import { rawGrpcClient, rawUnary } from "../test/helpers/raw-grpc.js";
import { interleaved, processCpu, type CpuMeter, type PhaseResult } from "./lib/interleave.js";
import { fmt } from "./lib/measure.js";

function flag(name: string, fallback: string): string {
  const i = process.argv.indexOf(name);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1]! : fallback;
}

const OPS = Number(flag("--ops", "6000"));
const CLIENTS = Number(flag("--clients", "64"));
const SLICE = Number(flag("--slice", "500"));
const SESSIONS = 256;
const TTL_MS = 10 * 60_000;
const STORE_TIMEOUT_MS = 5000;
const EVENT = Buffer.from(JSON.stringify({ text: "x".repeat(1000) }));

/** Appends and renews on one configuration, through one path. */
interface Path {
  append(worker: number, item: number): Promise<unknown>;
  renew(worker: number, item: number): Promise<unknown>;
  close(): Promise<void>;
}

/** One cluster configuration under test. */
interface Config {
  name: string;
  cluster: SpawnedCluster;
  server: ServerProcess;
  driver: Path;
  store: Path;
  /** CPU of the cluster's redis-servers (and this process). */
  redisCpu: CpuMeter;
  /** The same plus the server process. */
  driverCpu: CpuMeter;
}

const leaseId = (i: number) => `bench-lease-${i % SESSIONS}`;
const logId = (i: number) => `bench-log-${i % SESSIONS}`;

async function driverPath(address: string): Promise<Path> {
  const clients = Array.from({ length: CLIENTS }, () => rawGrpcClient(SessionLeaseService, address, undefined, { "grpc.use_local_subchannel_pool": 1 }));
  const logs = Array.from({ length: CLIENTS }, () => rawGrpcClient(EventLogService, address, undefined, { "grpc.use_local_subchannel_pool": 1 }));
  const tokens: bigint[] = [];
  for (let i = 0; i < SESSIONS; i++) tokens[i] = (await rawUnary(clients[0]!, SessionLeaseService.method.acquire, { sessionId: leaseId(i), owner: "driver" })).lease!.token;
  return {
    append: (w, i) => rawUnary(logs[w]!, EventLogService.method.append, { sessionId: logId(i), event: { format: "eventlog-json/1", payload: EVENT } }),
    async renew(w, i) {
      const token = (await rawUnary(clients[w]!, SessionLeaseService.method.renew, { lease: { sessionId: leaseId(i), owner: "driver", token: tokens[i % SESSIONS]! } })).lease!.token;
      if (token !== tokens[i % SESSIONS]) throw new Error(`renew of ${leaseId(i)} changed the token`);
    },
    async close() {
      for (const c of [...clients, ...logs]) c.close();
    },
  };
}

async function storePath(cluster: SpawnedCluster, waitReplicas: number): Promise<Path> {
  const options = { url: cluster.url, storeTimeoutMs: STORE_TIMEOUT_MS };
  const client = await connectRedisCluster(options);
  const writer = waitReplicas > 0 ? await connectRedisCluster(options) : undefined;
  if (writer !== undefined) setReplicaWait(client, { replicas: waitReplicas, writer });
  // Keys of their own (another prefix), beside the driver's.
  const keys = new RedisKeys("bench-store:");
  const log = new RedisEventLogStore(client, keys, STORE_TIMEOUT_MS);
  const leases = new RedisSessionLeaseStore(client, keys, ttlMicros(TTL_MS), STORE_TIMEOUT_MS);
  const tokens: bigint[] = [];
  for (let i = 0; i < SESSIONS; i++) {
    const r = await leases.acquire(leaseId(i), "store");
    if (r.outcome !== "granted") throw new Error(`acquire ${leaseId(i)}: ${r.outcome}`);
    tokens[i] = r.hold.token;
  }
  return {
    append: (_w, i) => log.append(logId(i), { kind: "event", format: "eventlog-json/1", payload: EVENT }),
    async renew(_w, i) {
      const r = await leases.renew(leaseId(i), "store", tokens[i % SESSIONS]!);
      if (r.outcome !== "granted") throw new Error(`renew ${leaseId(i)}: ${r.outcome}`);
    },
    async close() {
      client.disconnect();
      writer?.disconnect();
    },
  };
}

async function configure(name: string, cluster: SpawnedCluster, waitReplicas: number): Promise<Config> {
  const server = await startServer(["event-log", "session-lease", "--store", cluster.url, "--lease-ttl", `${TTL_MS}ms`, "--redis-wait-replicas", String(waitReplicas)]);
  const redisPids = () => cluster.nodes.map((n) => n.pid!).filter((p) => p !== undefined);
  return {
    name,
    cluster,
    server,
    driver: await driverPath(server.address),
    store: await storePath(cluster, waitReplicas),
    redisCpu: () => processCpu(redisPids())(),
    driverCpu: () => processCpu([...redisPids(), server.proc.pid!])(),
  };
}

interface Row {
  config: string;
  path: string;
  op: string;
  result: PhaseResult;
}

async function main(): Promise<void> {
  const redisVersion = execFileSync("redis-server", ["--version"], { encoding: "utf8" }).trim().split(" ").find((w) => w.startsWith("v="));
  const began = loadavg()[0]!;
  const [one, three] = [await spawnCluster({ primaries: 1, replicas: 1 }), await spawnCluster({ primaries: 3, replicas: 1 })];
  const configs = [await configure("1 primary", one, 0), await configure("3 primaries", three, 0), await configure("3 primaries, WAIT 1", three, 1)];
  const rows: Row[] = [];
  try {
    for (const path of ["driver", "store"] as const) {
      for (const op of ["append", "renew"] as const) {
        // Warm-up: every configuration, one slice, not recorded.
        await interleaved(configs.map((c) => c[path][op]), CLIENTS, SLICE, SLICE);
        const samples = await interleaved(
          configs.map((c) => c[path][op]),
          CLIENTS,
          OPS,
          SLICE,
          configs.map((c) => (path === "driver" ? c.driverCpu : c.redisCpu)),
        );
        samples.forEach((s, k) => rows.push({ config: configs[k]!.name, path: path === "driver" ? "driver (gRPC)" : "store (in-process)", op: op === "append" ? "Append" : "Renew", result: s.summary() }));
      }
    }
  } finally {
    for (const c of configs) {
      await c.driver.close();
      await c.store.close();
      await c.server.stop();
    }
    await one.stop();
    await three.stop();
  }
  const lines = [
    `Redis Cluster benchmark: ${OPS} operations per configuration, path and op, ${CLIENTS} in flight, slices of ${SLICE}; node ${process.version}, ${cpus().length} cores, redis ${redisVersion}; load average (1 min) ${began.toFixed(2)} at the start, ${loadavg()[0]!.toFixed(2)} at the end`,
    "",
    "| configuration | path | op | ops/s | p50 ms | p99 ms | CPU ms/op |",
    "|---|---|---|---:|---:|---:|---:|",
    ...rows.map((r) => `| ${r.config} | ${r.path} | ${r.op} | ${fmt(r.result.opsPerSecond)} | ${fmt(r.result.p50Ms)} | ${fmt(r.result.p99Ms)} | ${r.result.cpuMsPerOp.toFixed(3)} |`),
    "",
    "| path | op | 3 primaries / 1 primary ops/s | 3 / 1 CPU ms/op | WAIT 1 / none ops/s (3 primaries) | WAIT 1 / none p50 |",
    "|---|---|---:|---:|---:|---:|",
  ];
  for (const path of [...new Set(rows.map((r) => r.path))]) {
    for (const op of ["Append", "Renew"]) {
      const get = (config: string) => rows.find((r) => r.path === path && r.op === op && r.config === config)!.result;
      const [a, b, w] = [get("1 primary"), get("3 primaries"), get("3 primaries, WAIT 1")];
      lines.push(`| ${path} | ${op} | ${(b.opsPerSecond / a.opsPerSecond).toFixed(2)} | ${(b.cpuMsPerOp / a.cpuMsPerOp).toFixed(2)} | ${(w.opsPerSecond / b.opsPerSecond).toFixed(2)} | ${(w.p50Ms / b.p50Ms).toFixed(2)} |`);
    }
  }
  process.stdout.write(`${lines.join("\n")}\n`);
}

await main();
