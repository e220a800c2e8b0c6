/**
 * Unary call path benchmark (issue 11, "lean unary path"): Load of a 1 KiB
 * snapshot, lease Renew and a small durable Append, 64 calls in flight from
 * one plain grpc-js client, against `serve all` on an SQLite file and on a
 * spawned durable redis-server, beside the transport floor (a bare grpc-js
 * server answering the same message shapes, bench/lib/floor-server.ts).
 * Driver and floor alternate in slices (bench/lib/interleave.ts) so that load
 * from other processes falls on both alike. For each it prints throughput,
 * p50/p99 latency and the **server process's** CPU time per call
 * (microseconds; redis-server's own CPU is not counted), and the ratios
 * driver ÷ floor.
 *
 * Run: npm run build && node dist/bench/unary-path.js [calls-per-case] [backends] [baseline-main.js]
 *   calls-per-case default 20000; backends default sqlite,redis; with a
 *   baseline (another build's dist/services/server/main.js) both builds are
 *   measured in the same interleaved slices as the floor. The servers inherit
 *   the environment: with `OTEL_EXPORTER_OTLP_ENDPOINT` set, this build runs
 *   with tracing on (README.md "Tracing"; figures in bench/RESULTS.md).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir, loadavg } from "node:os";
import { join } from "node:path";
import { startServer } from "../test/helpers/server.js";
import { spawnRedis } from "../test/helpers/redis-server.js";
import { startTransportFloor } from "./lib/floor.js";
import { driverUnaryOps, floorUnaryOps, type Op } from "./lib/unary-ops.js";
import { interleaved, processCpu, type PhaseResult } from "./lib/interleave.js";
import { fmt } from "./lib/measure.js";

const CALLS = Number(process.argv[2] ?? 20_000);
const BACKENDS = (process.argv[3] ?? "sqlite,redis").split(",");
/** Optional `main.js` of another build (e.g. main's) measured in the same interleaved run, for before/after ratios. */
const BASELINE = process.argv[4];
const IN_FLIGHT = 64;
const SLICE = 2_000;

async function main() {
  const floor = await startTransportFloor();
  const floorOps: Record<string, Op> = floorUnaryOps(floor);
  const builds = [{ name: "driver", main: undefined as string | undefined }, ...(BASELINE === undefined ? [] : [{ name: "baseline driver", main: BASELINE }])];
  const dir = mkdtempSync(join(tmpdir(), "mecatl-bench-"));
  const redis = BACKENDS.includes("redis") ? await spawnRedis() : undefined;
  const rows: Array<{ backend: string; op: string; target: string; result: PhaseResult; floor: PhaseResult }> = [];
  const load0 = loadavg()[0]!;
  for (const backend of BACKENDS) {
    const servers = await Promise.all(
      builds.map((b, i) =>
        startServer(
          ["all", ...(backend === "sqlite" ? ["--store", `sqlite:${join(dir, `driver-${i}.sqlite`)}`] : ["--store", redis!.url, "--redis-key-prefix", `bench-${i}:`]), "--lease-ttl", "1h", "--log-level", "warn"],
          { main: b.main },
        ),
      ),
    );
    const ops: Array<Record<string, Op>> = await Promise.all(servers.map((server) => driverUnaryOps(server.address, IN_FLIGHT)));
    for (const op of Object.keys(floorOps)) {
      // CPU is metered per contender: the floor's server process, then each driver's.
      const meters = [processCpu([floor.pid], false), ...servers.map((server) => processCpu([server.proc.pid!], false))];
      const [floorResult, ...driverResults] = (await interleaved([floorOps[op]!, ...ops.map((o) => o[op]!)], IN_FLIGHT, CALLS, SLICE, meters)).map((x) => x.summary());
      for (const [i, result] of driverResults.entries()) rows.push({ backend, op, target: builds[i]!.name, result, floor: floorResult! });
      process.stderr.write(`${backend} ${op}: floor ${fmt(floorResult!.opsPerSecond)}/s, ${driverResults.map((r, i) => `${builds[i]!.name} ${fmt(r.opsPerSecond)}/s`).join(", ")}\n`);
    }
    for (const server of servers) await server.stop();
  }
  floor.stop();
  await redis?.stop();
  rmSync(dir, { recursive: true, force: true });
  console.log(`unary path: ${CALLS} calls per case, ${IN_FLIGHT} in flight, node ${process.version}, load average (1 min) ${load0.toFixed(2)} at start, ${loadavg()[0]!.toFixed(2)} at end\n`);
  console.log("| backend | call | target | calls/s | ÷ floor calls/s | p50 ms | server CPU µs/call | ÷ floor CPU | floor calls/s | floor CPU µs/call |");
  console.log("|---|---|---|---:|---:|---:|---:|---:|---:|---:|");
  for (const r of rows) {
    const cpu = r.result.cpuMsPerOp * 1000;
    const floorCpu = r.floor.cpuMsPerOp * 1000;
    console.log(
      `| ${r.backend} | ${r.op} | ${r.target} | ${fmt(r.result.opsPerSecond)} | ${fmt(r.result.opsPerSecond / r.floor.opsPerSecond, 2)} | ${fmt(r.result.p50Ms)} | ${fmt(cpu)} | ${fmt(cpu / floorCpu, 2)} | ${fmt(r.floor.opsPerSecond)} | ${fmt(floorCpu)} |`,
    );
  }
}

await main();
