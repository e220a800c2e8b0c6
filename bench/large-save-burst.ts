/**
 * A burst of concurrent large Saves against one server (issue 11: large
 * Saves of one server are staged one at a time, storage/large-write-line.ts):
 * `count` grpc-js clients, each on its own connection, send one Save of
 * `mib` MiB at the same moment; prints each one's outcome and when it came,
 * in seconds after sending. With a `--store-timeout` too short for the whole
 * burst, the first in line succeed and the last fail with nothing written,
 * where Saves staged side by side all failed together.
 *
 * With the server's pid, also prints its RSS (MiB) before the burst and 2 s
 * and 5 s after the last answer: memory a burst left behind, refused Saves'
 * payloads included (the store failure log once held them for 10 s and
 * more; bench/RESULTS.md).
 *
 * Run: npm run build && node dist/bench/large-save-burst.js HOST:PORT [mib=60] [count=8] [server-pid]
 *   (start the server first, e.g. `node dist/services/server/main.js serve session-store
 *   --listen 127.0.0.1:50099 --store sqlite:/tmp/burst/s.sqlite`)
 */
import { SessionStoreService } from "../gen/mecatl/driver/v1/session_store_pb.js";
import { rawGrpcClient, rawUnary } from "../test/helpers/raw-grpc.js";
import { rssBytes } from "../test/helpers/rss.js";

const address = process.argv[2];
const MIB = Number(process.argv[3] ?? 60);
const COUNT = Number(process.argv[4] ?? 8);
const PID = process.argv[5] === undefined ? undefined : Number(process.argv[5]);
if (address === undefined) throw new Error("usage: large-save-burst.js HOST:PORT [mib] [count] [server-pid]");
/** The server's RSS in MiB, as text. */
const rss = () => (rssBytes(PID!) / 2 ** 20).toFixed(0);
const rssBefore = PID === undefined ? undefined : rss();

const clients = Array.from({ length: COUNT }, () => rawGrpcClient(SessionStoreService, address));
const started = performance.now();
const since = () => ((performance.now() - started) / 1000).toFixed(1);
const outcomes = await Promise.all(
  clients.map((client, i) =>
    rawUnary(client, SessionStoreService.method.save, { sessionId: `burst-${i}`, snapshot: { format: "sessnap-json/1", payload: Buffer.alloc(MIB * 1024 * 1024, 0x61 + (i % 26)) } }).then(
      () => `OK at ${since()} s`,
      (err: Error) => `failed at ${since()} s (${err.message})`,
    ),
  ),
);
for (const [i, o] of outcomes.entries()) console.log(`Save ${i}: ${o}`);
console.log(`${outcomes.filter((o) => o.startsWith("OK")).length} of ${COUNT} Saves of ${MIB} MiB succeeded; the last answer came ${since()} s after sending`);
for (const c of clients) c.close();
if (PID !== undefined) {
  await new Promise((resolve) => setTimeout(resolve, 2_000));
  const after2 = rss();
  await new Promise((resolve) => setTimeout(resolve, 3_000));
  console.log(`server RSS: ${rssBefore} MiB before, ${after2} MiB 2 s after the last answer, ${rss()} MiB 5 s after`);
}
