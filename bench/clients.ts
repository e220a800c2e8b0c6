/**
 * Client overhead benchmark (issue 6): the same calls through the typed
 * clients (`clients/`) and through a bare generated Connect client over the
 * same kind of transport, against one server, so the ratio shows what the
 * harness's semantics cost: the snapshot id guard (a JSON decode of every
 * loaded snapshot), JSON checks of appended and read events, error mapping.
 *
 * Cases: Load of a 1 KiB and a 4 MiB snapshot, Append of 1 KiB events, and a
 * ReadAfter of a 2,000-event log (records per second), at 1 and 16 calls in
 * flight. Both clients use one HTTP/2 connection each.
 *
 * Run: npm run build && node dist/bench/clients.js [seconds-per-case]
 */
import { createClient } from "@connectrpc/connect";
import { SessionStoreService } from "../gen/mecatl/driver/v1/session_store_pb.js";
import { EventLogService } from "../gen/mecatl/driver/v1/event_log_pb.js";
import { startServer } from "../test/helpers/server.js";
import { grpcTransport } from "../test/helpers/clients.js";
import { openDriverClients } from "../clients/factory.js";
import { measure, fmt, type RunResult } from "./lib/measure.js";

const seconds = Number(process.argv[2] ?? 2);
const LOG_EVENTS = 2000;

function snapshot(id: string, bytes: number): Uint8Array {
  return new TextEncoder().encode(JSON.stringify({ id, state: "idle", messages: [{ role: "user", text: "x".repeat(Math.max(0, bytes - 80)) }] }));
}

function event(i: number): Uint8Array {
  return new TextEncoder().encode(JSON.stringify({ type: "tool_result", seq: i, result: "y".repeat(1000) }));
}

async function main() {
  const server = await startServer(["session-store", "event-log", "--store", "sqlite::memory:"]);
  const raw = { store: createClient(SessionStoreService, grpcTransport(server.address)), log: createClient(EventLogService, grpcTransport(server.address)) };
  const typed = await openDriverClients({ sessionStoreUrl: server.address, eventLogUrl: server.address });
  const small = snapshot("b-small", 1024);
  const big = snapshot("b-big", 4 * 1024 * 1024);
  await typed.sessionStore!.save("b-small", small);
  await typed.sessionStore!.save("b-big", big);
  for (let i = 0; i < LOG_EVENTS; i++) await typed.eventLog!.append("b-log", event(i));
  const ev = event(0);

  const cases: Array<{ name: string; inFlight: number[]; unit: number; raw: () => Promise<unknown>; typed: () => Promise<unknown> }> = [
    { name: "Load 1 KiB", inFlight: [1, 16], unit: 1, raw: () => raw.store.load({ sessionId: "b-small" }), typed: () => typed.sessionStore!.load("b-small") },
    { name: "Load 4 MiB", inFlight: [1], unit: 1, raw: () => raw.store.load({ sessionId: "b-big" }), typed: () => typed.sessionStore!.load("b-big") },
    {
      name: "Append 1 KiB",
      inFlight: [1, 16],
      unit: 1,
      raw: () => raw.log.append({ sessionId: "b-append-raw", event: { format: "eventlog-json/1", payload: ev } }),
      typed: () => typed.eventLog!.append("b-append", ev),
    },
    {
      name: `ReadAfter ${LOG_EVENTS} x 1 KiB (records)`,
      inFlight: [1],
      unit: LOG_EVENTS,
      raw: async () => {
        for await (const _ of raw.log.readAfter({ sessionId: "b-log" })) void _;
      },
      typed: async () => {
        for await (const _ of typed.eventLog!.readAfter("b-log")) void _;
      },
    },
  ];

  const rows: Array<{ name: string; inFlight: number; raw: RunResult; typed: RunResult; unit: number }> = [];
  for (const c of cases) {
    for (const n of c.inFlight) {
      const r = await measure(c.raw, n, seconds * 1000);
      const t = await measure(c.typed, n, seconds * 1000);
      rows.push({ name: c.name, inFlight: n, raw: r, typed: t, unit: c.unit });
      process.stderr.write(`${c.name} x${n}: raw ${fmt(r.perSecond * c.unit)}/s, typed ${fmt(t.perSecond * c.unit)}/s\n`);
    }
  }
  typed.close();
  await server.stop();

  console.log("| case | in flight | raw client /s | typed client /s | typed ÷ raw | raw p50 ms | typed p50 ms | raw p99 ms | typed p99 ms |");
  console.log("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
  for (const x of rows) {
    console.log(
      `| ${x.name} | ${x.inFlight} | ${fmt(x.raw.perSecond * x.unit)} | ${fmt(x.typed.perSecond * x.unit)} | ${fmt(x.typed.perSecond / x.raw.perSecond, 2)} | ${fmt(x.raw.p50Ms)} | ${fmt(x.typed.p50Ms)} | ${fmt(x.raw.p99Ms)} | ${fmt(x.typed.p99Ms)} |`,
    );
  }
}

await main();
