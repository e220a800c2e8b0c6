/**
 * Runs the RPC fuzzer against a fresh server on one backend and reports what
 * it saw; shared by the CI test (fuzz.test.ts) and the long-run script
 * (main.ts). Issue 10, deliverable 5.
 */
import fc from "fast-check";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { spawnRedis, type SpawnedRedis } from "../helpers/redis-server.js";
import { RpcFuzzer, type Defect, type FuzzStats, type WriteCounter } from "./fuzzer.js";
import { requestArb } from "./request-arbs.js";
import { redisWriteCounter, sqliteWriteCounter } from "./write-counters.js";

/** The backends a run can use: an SQLite file, `sqlite::memory:` (no write counter), a spawned Redis. */
export const FUZZ_BACKENDS = ["sqlite", "sqlite-memory", "redis"] as const;
export type FuzzBackend = (typeof FUZZ_BACKENDS)[number];

/** A server on a fresh store of one backend, with the fuzzer attached. */
export interface FuzzSession {
  fuzzer: RpcFuzzer;
  server: ServerProcess;
  /** Stops the server and removes the store. */
  close(): Promise<void>;
}

/** Starts a server on a fresh store of `backend` and populates it (see {@link RpcFuzzer.start}). */
export async function openFuzzSession(backend: FuzzBackend): Promise<FuzzSession> {
  const cleanup: Array<() => unknown> = [];
  let store = "sqlite::memory:";
  let redis: SpawnedRedis | undefined;
  if (backend === "sqlite") {
    const dir = mkdtempSync(join(tmpdir(), "mecatl-fuzz-"));
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
    store = `sqlite:${join(dir, "store.sqlite")}`;
  } else if (backend === "redis") {
    redis = await spawnRedis();
    cleanup.push(() => redis!.stop());
    store = redis.url;
  }
  const server = await startServer(["--store", store]);
  cleanup.unshift(() => server.stop());
  let counter: WriteCounter | undefined;
  if (backend === "sqlite") {
    const c = sqliteWriteCounter(store.slice("sqlite:".length));
    cleanup.unshift(() => c.close());
    counter = c.counter;
  } else if (redis !== undefined) {
    const client = redis.client();
    cleanup.unshift(() => client.disconnect());
    counter = redisWriteCounter(client);
  }
  const fuzzer = await RpcFuzzer.start(server, counter);
  cleanup.unshift(() => fuzzer.close());
  return {
    fuzzer,
    server,
    async close() {
      for (const fn of cleanup) await fn();
    },
  };
}

/**
 * Sends `requests` generated requests in batches of `batch` (each batch drawn
 * with `seed + batch index`, from pools that include the cursors and tokens
 * learnt so far), checking the server is alive after each batch.
 *
 * @param onBatch called after each batch with the totals so far.
 */
export async function fuzzRequests(fuzzer: RpcFuzzer, requests: number, seed: number, onBatch?: (stats: FuzzStats) => void, batch = 500): Promise<FuzzStats> {
  for (let sent = 0, i = 0; sent < requests; sent += batch, i++) {
    const sample = fc.sample(requestArb(fuzzer.pools), { numRuns: Math.min(batch, requests - sent), seed: seed + i });
    for (const req of sample) await fuzzer.check(req);
    if ((await fuzzer.checkAlive()) !== undefined) break;
    onBatch?.(fuzzer.stats);
  }
  return fuzzer.stats;
}

/** Defects grouped by kind, RPC, code and message shape (quoted values and numbers elided), with counts. */
export function groupDefects(defects: readonly Defect[]): Array<{ count: number; example: Defect }> {
  const groups = new Map<string, { count: number; example: Defect }>();
  for (const d of defects) {
    const key = `${d.kind} ${d.rpc} ${d.code} ${d.details.replace(/"(?:[^"\\]|\\.)*"/g, '"…"').replace(/\d+/g, "N")}`;
    const g = groups.get(key);
    if (g === undefined) groups.set(key, { count: 1, example: d });
    else g.count++;
  }
  return [...groups.values()].sort((a, b) => b.count - a.count);
}
