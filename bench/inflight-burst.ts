/**
 * Memory under a burst of large calls (issue 10 deliverable 3): twelve
 * concurrent clients, each on its own connection, Save a 60 MiB snapshot and
 * Load it back, against `serve session-store` on an SQLite file with
 * `--max-inflight-bytes` set. Prints the server's RSS before the burst, its
 * peak during it and its RSS once idle afterwards, beside the budget, and how
 * many calls were answered OK or RESOURCE_EXHAUSTED (calls beyond the budget
 * wait up to 2 s for room).
 *
 * Run: npm run build && node dist/bench/inflight-burst.js [budget, default 512MB] [rounds, default 1]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import bytes from "bytes";
import { SessionStoreService } from "../gen/mecatl/driver/v1/session_store_pb.js";
import { startServer } from "../test/helpers/server.js";
import { rawGrpcClient, rawUnary } from "../test/helpers/raw-grpc.js";
import { mib, rssBytes, sampleRss } from "../test/helpers/rss.js";

const BUDGET = process.argv[2] ?? "512MB";
const ROUNDS = Number(process.argv[3] ?? 1);
const CLIENTS = 12;
const SIZE = 60 * 1024 * 1024;
const IDLE_WAIT_MS = 5_000;

async function main() {
  const dir = mkdtempSync(join(tmpdir(), "mecatl-burst-"));
  const server = await startServer(["session-store", "--store", `sqlite:${join(dir, "store.sqlite")}`, "--max-inflight-bytes", BUDGET, "--log-level", "warn"]);
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
  for (let round = 0; round < ROUNDS; round++) {
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
  }
  const seconds = (performance.now() - started) / 1000;
  const { peak } = sampler.stop();
  await new Promise((r) => setTimeout(r, IDLE_WAIT_MS));
  const idle = rssBytes(pid);
  for (const c of clients) c.close();
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
  const budget = bytes.parse(BUDGET)!;
  console.log(`inflight burst: ${CLIENTS} clients × (Save + Load of 60 MiB) × ${ROUNDS} round(s) in ${seconds.toFixed(1)} s, --max-inflight-bytes ${BUDGET}, node ${process.version}\n`);
  console.log("| budget MiB | RSS before MiB | peak RSS MiB | peak − before MiB | idle RSS after 5 s MiB | outcomes |");
  console.log("|---:|---:|---:|---:|---:|---|");
  console.log(
    `| ${mib(budget)} | ${mib(baseline)} | ${mib(peak)} | ${mib(peak - baseline)} | ${mib(idle)} | ${[...outcomes].map(([k, v]) => `${k}: ${v}`).join(", ")} |`,
  );
}

await main();
