/**
 * Memory under a burst of large calls (issue 10 deliverable 3): twelve
 * concurrent clients, each on its own connection, Save a 60 MiB snapshot and
 * Load it back, against `serve session-store` on an SQLite file with
 * `--max-inflight-bytes` set. Prints the server's RSS before the burst, its
 * peak during it and its RSS once idle afterwards, beside the budget, and how
 * many calls were answered OK or RESOURCE_EXHAUSTED (calls beyond the budget
 * wait up to 2 s for room).
 *
 * Run: npm run build && node dist/bench/inflight-burst.js [budget, default 512MB] [baseline-main.js]
 *   with a baseline (another build's dist/services/server/main.js), the same
 *   burst runs first against it, without the budget flag.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir, loadavg } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import bytes from "bytes";
import { SessionStoreService } from "../gen/mecatl/driver/v1/session_store_pb.js";
import { startServer } from "../test/helpers/server.js";
import { rawGrpcClient, rawUnary } from "../test/helpers/raw-grpc.js";
import { mib, rssBytes, sampleRss } from "../test/helpers/rss.js";

const BUDGET = process.argv[2] ?? "512MB";
/** Optional `main.js` of another build (e.g. main's, which has no budget) run through the same burst first. */
const BASELINE = process.argv[3];
const CLIENTS = 12;
const SIZE = 60 * 1024 * 1024;
const IDLE_WAIT_MS = 5_000;

/** One burst against a fresh server; returns the table row. */
async function burst(target: string, serveArgs: string[], main: string | undefined): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), "mecatl-burst-"));
  const server = await startServer(["session-store", "--store", `sqlite:${join(dir, "store.sqlite")}`, ...serveArgs, "--log-level", "warn"], { main });
  const pid = server.proc.pid!;
  const clients = Array.from({ length: CLIENTS }, () => rawGrpcClient(SessionStoreService, server.address, undefined, { "grpc.use_local_subchannel_pool": 1 }));
  const payload = Buffer.alloc(SIZE, 0x61);
  const outcomes = new Map<string, number>();
  const count = (what: string) => outcomes.set(what, (outcomes.get(what) ?? 0) + 1);
  const codeOf = (err: unknown) => grpc.status[(err as grpc.ServiceError).code] ?? String(err);
  await rawUnary(clients[0]!, SessionStoreService.method.capabilities, {});
  const baseline = rssBytes(pid);
  const sampler = sampleRss(pid, 20);
  const started = performance.now();
  await Promise.all(
    clients.map(async (client, i) => {
      const sessionId = `burst-${i}`;
      try {
        await rawUnary(client, SessionStoreService.method.save, { sessionId, snapshot: { format: "sessnap-json/1", payload } });
        count("Save OK");
      } catch (err) {
        count(`Save ${codeOf(err)}`);
        return;
      }
      try {
        const res = await rawUnary(client, SessionStoreService.method.load, { sessionId });
        count(res.snapshot?.payload.length === SIZE ? "Load OK" : "Load wrong size");
      } catch (err) {
        count(`Load ${codeOf(err)}`);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  const { peak } = sampler.stop();
  await new Promise((r) => setTimeout(r, IDLE_WAIT_MS));
  const idle = rssBytes(pid);
  for (const c of clients) c.close();
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
  const outcomeText = [...outcomes].sort().map(([k, v]) => `${k}: ${v}`).join(", ");
  return `| ${target} | ${seconds.toFixed(1)} | ${mib(baseline)} | ${mib(peak)} | ${mib(peak - baseline)} | ${mib(idle)} | ${outcomeText} |`;
}

async function main() {
  const rows: string[] = [];
  if (BASELINE !== undefined) rows.push(await burst("baseline build (no budget)", [], BASELINE));
  rows.push(await burst(`--max-inflight-bytes ${BUDGET} (${mib(bytes.parse(BUDGET)!)} MiB)`, ["--max-inflight-bytes", BUDGET], undefined));
  console.log(`inflight burst: ${CLIENTS} clients, each on its own connection, Save + Load of 60 MiB at once; node ${process.version}, load average (1 min) ${loadavg()[0]!.toFixed(2)}\n`);
  console.log("| server | burst s | RSS before MiB | peak RSS MiB | peak − before MiB | idle RSS 5 s after MiB | outcomes |");
  console.log("|---|---:|---:|---:|---:|---:|---|");
  for (const row of rows) console.log(row);
}

await main();
