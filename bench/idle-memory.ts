/**
 * Idle memory after bursts of large Saves, per glibc malloc setting (issue 14:
 * with the default `--max-inflight-bytes`, RSS stayed about 1 GB while idle
 * after eight concurrent 60 MiB Saves, with a V8 heap of 16 MB).
 *
 * Each run starts `serve session-store` on an SQLite file with the default
 * budget, with one set of glibc `MALLOC_*` environment variables, and sends
 * `--bursts` bursts of eight concurrent 60 MiB Saves (each client on its own
 * connection; `--store-timeout 120s`, so that a slow disk under load does
 * not cut them short). After each burst it waits `--idle` seconds (the server
 * runs its post-burst garbage collection within one) and reads the server's
 * RSS from /proc and its V8 heap from /metrics. Then, what the setting costs:
 * 400 Saves of 1 MiB, 16 in flight, timed, with the server's CPU time per
 * call, and the most memory mappings the server had during the bursts (each
 * allocation glibc serves by mmap is one, below the kernel's
 * vm.max_map_count unless the kernel merges them). Variants run interleaved,
 * in a rotated order per round, so load on the machine falls on all of them
 * alike; the table gives medians over the rounds and ratios to the default
 * (no variable set).
 *
 * Run: npm run build && node dist/bench/idle-memory.js [--rounds 3] [--bursts 2] [--idle 10] [--variants 0,3]
 *   (`--variants`: indexes into the table's rows, to run only some; the first given is the reference)
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { loadavg, totalmem } from "node:os";
import { join } from "node:path";
import { tmpdir } from "node:os";
import { parseArgs } from "node:util";
import { SessionStoreService } from "../gen/mecatl/driver/v1/session_store_pb.js";
import { startServer } from "../test/helpers/server.js";
import { rawGrpcClient, rawUnary } from "../test/helpers/raw-grpc.js";
import { metricValue } from "../test/helpers/metrics.js";
import { mib, rssBytes, sampleRss } from "../test/helpers/rss.js";
import { quantile } from "./lib/measure.js";
import { processCpu } from "./lib/interleave.js";

const { values } = parseArgs({ options: { rounds: { type: "string", default: "3" }, bursts: { type: "string", default: "2" }, idle: { type: "string", default: "10" }, variants: { type: "string" } } });
const ROUNDS = Number(values.rounds);
const BURSTS = Number(values.bursts);
const IDLE_MS = Number(values.idle) * 1000;
const CLIENTS = 8;
/** Debian's jemalloc, compared when installed (libjemalloc2). */
const JEMALLOC = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2";
/** The cost phase: this many Saves of {@link SMALL} bytes, {@link IN_FLIGHT} at a time. */
const SMALL_SAVES = 400;
const SMALL = 1024 * 1024;
const IN_FLIGHT = 16;
const SIZE = 60 * 1024 * 1024;

/** The glibc settings compared: none (the default), fewer arenas, fixed thresholds, both. */
const ALL_VARIANTS: Array<{ label: string; env: Record<string, string> }> = [
  { label: "default (no MALLOC_* set)", env: {} },
  { label: "`MALLOC_ARENA_MAX=2`", env: { MALLOC_ARENA_MAX: "2" } },
  { label: "`MALLOC_TRIM_THRESHOLD_=131072 MALLOC_MMAP_THRESHOLD_=131072`", env: { MALLOC_TRIM_THRESHOLD_: "131072", MALLOC_MMAP_THRESHOLD_: "131072" } },
  { label: "`MALLOC_MMAP_THRESHOLD_=16384`", env: { MALLOC_MMAP_THRESHOLD_: "16384" } },
  ...(existsSync(JEMALLOC) ? [{ label: "jemalloc (`LD_PRELOAD`, `MALLOC_CONF=background_thread:true`)", env: { LD_PRELOAD: JEMALLOC, MALLOC_CONF: "background_thread:true" } }] : []),
];

const VARIANTS = values.variants === undefined ? ALL_VARIANTS : values.variants.split(",").map((i) => ALL_VARIANTS[Number(i)]!);

/** What one run measured; arrays have one entry per burst. */
interface RunResult {
  beforeRss: number;
  peakRss: number[];
  idleRss: number[];
  idleHeap: number[];
  burstSeconds: number[];
  /** Most memory mappings seen during the bursts. */
  peakMaps: number;
  /** The cost phase: Saves per second, and server CPU milliseconds per Save. */
  smallPerSecond: number;
  smallCpuMs: number;
}

/** Memory mappings of `pid` (lines of /proc/<pid>/maps). */
function mapCount(pid: number): number {
  return readFileSync(`/proc/${pid}/maps`, "utf8").split("\n").length - 1;
}

async function run(env: Record<string, string>): Promise<RunResult> {
  const dir = mkdtempSync(join(tmpdir(), "mecatl-idle-"));
  const server = await startServer(["session-store", "--store", `sqlite:${join(dir, "store.sqlite")}`, "--metrics-listen", "127.0.0.1:0", "--log-level", "warn", "--store-timeout", "120s"], { env });
  const pid = server.proc.pid!;
  const clients = Array.from({ length: CLIENTS }, () => rawGrpcClient(SessionStoreService, server.address, undefined, { "grpc.use_local_subchannel_pool": 1 }));
  const payload = Buffer.alloc(SIZE, 0x61);
  try {
    for (const c of clients) await rawUnary(c, SessionStoreService.method.capabilities, {});
    const result: RunResult = { beforeRss: rssBytes(pid), peakRss: [], idleRss: [], idleHeap: [], burstSeconds: [], peakMaps: 0, smallPerSecond: 0, smallCpuMs: 0 };
    for (let b = 0; b < BURSTS; b++) {
      const sampler = sampleRss(pid, 20);
      const maps = setInterval(() => (result.peakMaps = Math.max(result.peakMaps, mapCount(pid))), 100);
      const started = performance.now();
      await Promise.all(clients.map((c, i) => rawUnary(c, SessionStoreService.method.save, { sessionId: `idle-${i}`, snapshot: { format: "sessnap-json/1", payload } })));
      result.burstSeconds.push((performance.now() - started) / 1000);
      clearInterval(maps);
      result.peakRss.push(sampler.stop().peak);
      await new Promise((r) => setTimeout(r, IDLE_MS));
      result.idleRss.push(rssBytes(pid));
      result.idleHeap.push(await metricValue(server.metricsAddress!, "nodejs_heap_size_used_bytes"));
    }
    const small = Buffer.alloc(SMALL, 0x62);
    const cpu = processCpu([pid], false);
    const cpuBefore = cpu();
    const started = performance.now();
    let next = 0;
    await Promise.all(
      clients.slice(0, 1).flatMap((c) =>
        Array.from({ length: IN_FLIGHT }, async () => {
          for (let i = next++; i < SMALL_SAVES; i = next++) await rawUnary(c, SessionStoreService.method.save, { sessionId: `small-${i % 64}`, snapshot: { format: "sessnap-json/1", payload: small } });
        }),
      ),
    );
    result.smallPerSecond = SMALL_SAVES / ((performance.now() - started) / 1000);
    result.smallCpuMs = ((cpu() - cpuBefore) * 1000) / SMALL_SAVES;
    return result;
  } finally {
    for (const c of clients) c.close();
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

const median = (xs: number[]) => quantile([...xs].sort((a, b) => a - b), 0.5);

async function main() {
  const results = VARIANTS.map(() => [] as RunResult[]);
  for (let round = 0; round < ROUNDS; round++) {
    for (let k = 0; k < VARIANTS.length; k++) {
      const v = (round + k) % VARIANTS.length;
      const r = await run(VARIANTS[v]!.env);
      results[v]!.push(r);
      process.stderr.write(`round ${round + 1}/${ROUNDS} ${VARIANTS[v]!.label}: idle RSS ${r.idleRss.map(mib).join(" / ")} MiB\n`);
    }
  }
  console.log(
    `idle memory: ${CLIENTS} concurrent 60 MiB Saves per burst, ${BURSTS} bursts per server, RSS read ${IDLE_MS / 1000} s after each; default --max-inflight-bytes (${mib(totalmem() / 4)} MiB here); ` +
      `medians of ${ROUNDS} interleaved rounds; node ${process.version}, load average (1 min) ${loadavg()[0]!.toFixed(2)}\n`,
  );
  const burstHeads = Array.from({ length: BURSTS }, (_, b) => [`peak RSS ${b + 1} MiB`, `idle RSS ${b + 1} MiB`, `idle RSS ${b + 1} ÷ default`, `heap ${b + 1} MiB`]).flat();
  console.log(`| glibc malloc | RSS before MiB | ${burstHeads.join(" | ")} | burst s | most mappings | 1 MiB Saves/s (÷ default) | server CPU ms per 1 MiB Save (÷ default) |`);
  console.log(`|---|${"---:|".repeat(burstHeads.length + 5)}`);
  const med = (v: number, f: (r: RunResult) => number) => median(results[v]!.map(f));
  for (const [v, rs] of results.entries()) {
    const cells = Array.from({ length: BURSTS }, (_, b) => {
      const idle = med(v, (r) => r.idleRss[b]!);
      return [mib(med(v, (r) => r.peakRss[b]!)), mib(idle), (idle / med(0, (r) => r.idleRss[b]!)).toFixed(2), mib(med(v, (r) => r.idleHeap[b]!))];
    }).flat();
    const rate = med(v, (r) => r.smallPerSecond);
    const cpuMs = med(v, (r) => r.smallCpuMs);
    console.log(
      `| ${VARIANTS[v]!.label} | ${mib(med(v, (r) => r.beforeRss))} | ${cells.join(" | ")} | ${median(rs.flatMap((r) => r.burstSeconds)).toFixed(1)} | ${med(v, (r) => r.peakMaps)} | ` +
        `${rate.toFixed(0)} (${(rate / med(0, (r) => r.smallPerSecond)).toFixed(2)}) | ${cpuMs.toFixed(2)} (${(cpuMs / med(0, (r) => r.smallCpuMs)).toFixed(2)}) |`,
    );
  }
}

await main();
