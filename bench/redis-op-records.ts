/**
 * What exactly-once costs on Redis (issue 9): Append through the event-log
 * store as it runs in the server (a bounded RedisOperation, the append
 * script with its operation record: one GET before the write, one SET ... PX
 * with it); the same recorded script called directly (the record's cost in
 * Redis, without the retry helper); and the script without the record,
 * called directly (what Append cost before operation records). All on one
 * spawned durable redis-server (`appendonly yes`, `appendfsync always`), in
 * process (no RPC), alternating slice by slice so drifting load falls on all
 * alike.
 *
 * Run: npm run build && node dist/bench/redis-op-records.js [seconds-per-slice] [slices]
 */
import type { Redis } from "ioredis";
import { spawnRedis } from "../test/helpers/redis-server.js";
import { connectRedis } from "../services/storage/redis-connection.js";
import { RedisKeys } from "../services/storage/redis-keys.js";
import { DEFAULT_STORE_TIMEOUT_MS } from "../services/storage/backend.js";
import { APPEND_SCRIPT, RedisEventLogStore } from "../services/event-log/redis.js";
import { opRecordTtlMs, runScript } from "../services/storage/redis-script.js";
import { randomBytes } from "node:crypto";
import { fmt, measure, type RunResult } from "./lib/measure.js";

const SLICE_MS = Number(process.argv[2] ?? "2") * 1000;
const SLICES = Number(process.argv[3] ?? "3");
const payload = new TextEncoder().encode(JSON.stringify({ type: "assistant", text: "x".repeat(400) }));

/** The append script as it was before operation records: its own code, returning its reply unrecorded. */
function defineBaseline(redis: Redis, keys: RedisKeys): (sessionId: string) => Promise<unknown> {
  redis.defineCommand("benchAppendUnrecorded", { lua: APPEND_SCRIPT.lua.replace("return op_done({gen, n})", "return {gen, n}") });
  const run = (redis as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>).benchAppendUnrecorded!.bind(redis);
  return (id) => run(2, keys.eventLogMeta(id), keys.eventLog(id), "0123456789abcdef", keys.eventLogChannel(id), "e", "eventlog-json/1", Buffer.from(payload));
}

/** The recorded append script, called once per append with a fresh record and no retry helper. */
function defineRecorded(redis: Redis, keys: RedisKeys): (sessionId: string) => Promise<unknown> {
  return (id) =>
    runScript(redis, APPEND_SCRIPT, [keys.eventLogMeta(id), keys.eventLog(id)], ["0123456789abcdef", keys.eventLogChannel(id), "e", "eventlog-json/1", Buffer.from(payload)], {
      key: keys.sessionOp(id, randomBytes(8).toString("hex")),
      ttlMs: opRecordTtlMs(DEFAULT_STORE_TIMEOUT_MS),
    });
}

function add(total: RunResult | undefined, r: RunResult): RunResult {
  if (total === undefined) return r;
  const calls = total.calls + r.calls;
  const seconds = total.seconds + r.seconds;
  // Latency quantiles: the mean over slices (each slice has thousands of calls).
  return { calls, seconds, perSecond: calls / seconds, p50Ms: (total.p50Ms + r.p50Ms) / 2, p99Ms: (total.p99Ms + r.p99Ms) / 2 };
}

async function main(): Promise<void> {
  const server = await spawnRedis();
  const redis = await connectRedis({ url: server.url, storeTimeoutMs: DEFAULT_STORE_TIMEOUT_MS });
  const keys = new RedisKeys("bench-op:");
  const store = new RedisEventLogStore(redis, keys, DEFAULT_STORE_TIMEOUT_MS);
  const baseline = defineBaseline(redis, keys);
  const direct = defineRecorded(redis, keys);
  console.log(`| appenders | store (record + retry helper): appends/s | p50 ms | p99 ms | recorded script, direct: appends/s | p50 ms | p99 ms | no record: appends/s | p50 ms | p99 ms | store ÷ no record | direct ÷ no record |`);
  console.log(`|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|`);
  try {
    for (const inFlight of [1, 16, 64]) {
      let recorded: RunResult | undefined;
      let bare: RunResult | undefined;
      let plain: RunResult | undefined;
      for (let s = 0; s < SLICES; s++) {
        recorded = add(recorded, await measure((i) => store.append(`r${i % 256}`, { kind: "event", format: "eventlog-json/1", payload }), inFlight, SLICE_MS));
        bare = add(bare, await measure((i) => direct(`d${i % 256}`), inFlight, SLICE_MS));
        plain = add(plain, await measure((i) => baseline(`p${i % 256}`), inFlight, SLICE_MS));
      }
      const cells = [recorded!, bare!, plain!].flatMap((r) => [fmt(r.perSecond), fmt(r.p50Ms), fmt(r.p99Ms)]);
      console.log(`| ${inFlight} | ${cells.join(" | ")} | ${fmt(recorded!.perSecond / plain!.perSecond, 2)} | ${fmt(bare!.perSecond / plain!.perSecond, 2)} |`);
    }
  } finally {
    redis.disconnect();
    await server.stop();
  }
}

await main();
