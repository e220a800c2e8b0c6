/**
 * `mecatl-drivers copy` benchmark (issue 14): a store of 10,000 sessions
 * (2 KiB sessnap snapshots, each with its metadata row and lineage record)
 * and 1,000,000 events (100 per session, about 200 bytes each) is copied
 * SQLite → Redis, Redis → SQLite and SQLite → SQLite by the real command
 * (a child process, as an operator runs it), each followed by its
 * verification; beside it, in the same run, the raw floor of the same work:
 * copying the SQLite file with `VACUUM INTO` (no per-record work at all).
 * Reports records per second and MiB per second of payload for the copy
 * and for the verification, and the ratio to the floor.
 *
 * The source is written through the copy's own import (the SQLite target
 * side of services/copy), which is the fastest way to fill it.
 *
 * Run: npm run build && node dist/bench/copy.js [sessions] [events-per-session]
 */
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawn } from "node:child_process";
import Database from "better-sqlite3";
import { openCopyEndpoint } from "../services/copy/copy-endpoint.js";
import { projectedRow, type SessionCopy } from "../services/session-store/copy-format.js";
import type { EventLogChunk } from "../services/event-log/copy-format.js";
import { spawnRedis } from "../test/helpers/redis-server.js";
import { MAIN } from "../test/helpers/server.js";
import { sessnap } from "../test/helpers/sessnap.js";

const SESSIONS = Number(process.argv[2] ?? 10_000);
const EVENTS_PER_SESSION = Number(process.argv[3] ?? 100);
const MiB = 1024 * 1024;

/** Fills an SQLite store through the copy's import: sessions (with rows), then logs. */
async function fill(store: string): Promise<{ records: number; bytes: number }> {
  const target = await openCopyEndpoint({ store, redis: {} }, "write");
  let bytes = 0;
  const text = "t".repeat(1500);
  for (let i = 0; i < SESSIONS; i += 500) {
    const batch: SessionCopy[] = [];
    for (let j = i; j < Math.min(SESSIONS, i + 500); j++) {
      const id = `bench-${String(j).padStart(6, "0")}`;
      const payload = sessnap({ id, owner: { Issuer: "https://issuer", Subject: `user-${j % 50}` }, messages: [{ role: "user", text }] });
      bytes += payload.byteLength;
      batch.push({ sessionId: id, format: "sessnap-json/1", payload, modifiedAtMicros: 1_700_000_000_000_000 + j, ...projectedRow(id, payload) });
    }
    await target.kinds.sessions.write(batch);
  }
  const event = (seq: number) => Buffer.from(JSON.stringify({ type: "tool_result", seq, text: "e".repeat(160) }));
  for (let i = 0; i < SESSIONS; i += 50) {
    const chunks: EventLogChunk[] = [];
    for (let j = i; j < Math.min(SESSIONS, i + 50); j++) {
      const records = Array.from({ length: EVENTS_PER_SESSION }, (_, k) => ({ kind: "event" as const, format: "eventlog-json/1", payload: event(k + 1), position: k + 1 }));
      bytes += records.reduce((n, r) => n + r.payload.byteLength, 0);
      chunks.push({ sessionId: `bench-${String(j).padStart(6, "0")}`, generation: (0x1000000000000000n + BigInt(j)).toString(16), length: EVENTS_PER_SESSION, records });
    }
    await target.kinds.events.write(chunks);
  }
  await target.close();
  return { records: SESSIONS * 2 + SESSIONS * EVENTS_PER_SESSION, bytes };
}

interface CopyReport {
  ok: boolean;
  copySeconds: number;
  verifySeconds: number;
  recordsCopied: number;
}

/** Runs `mecatl-drivers copy --json` and returns its report. */
function copy(from: string, to: string): Promise<CopyReport> {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, [MAIN, "copy", "--from", from, "--to", to, "--json"], { stdio: ["ignore", "pipe", "ignore"] });
    let out = "";
    proc.stdout.setEncoding("utf8").on("data", (c: string) => (out += c));
    proc.once("exit", (code) => (code === 0 ? resolve(JSON.parse(out) as CopyReport) : reject(new Error(`copy ${from} -> ${to} exited ${code}: ${out}`))));
  });
}

const dir = process.env.BENCH_COPY_DIR ?? mkdtempSync(join(tmpdir(), "mecatl-bench-copy-"));
const redis = await spawnRedis();
try {
  const src = `sqlite:${join(dir, "source.sqlite")}`;
  let t = performance.now();
  const { records, bytes } = await fill(src);
  console.log(`source: ${SESSIONS} sessions, ${SESSIONS * EVENTS_PER_SESSION} events, ${records} records, ${(bytes / MiB).toFixed(1)} MiB of payload, filled in ${((performance.now() - t) / 1000).toFixed(1)} s; file ${(statSync(join(dir, "source.sqlite")).size / MiB).toFixed(1)} MiB`);

  t = performance.now();
  const floorDb = new Database(join(dir, "source.sqlite"), { readonly: true });
  floorDb.exec(`VACUUM INTO '${join(dir, "floor.sqlite")}'`);
  floorDb.close();
  const floorSeconds = (performance.now() - t) / 1000;
  console.log(`floor (VACUUM INTO, SQLite file to SQLite file): ${floorSeconds.toFixed(2)} s`);

  const rows: string[][] = [];
  const run = async (name: string, from: string, to: string) => {
    const r = await copy(from, to);
    if (!r.ok) throw new Error(`${name}: verification failed`);
    rows.push([
      name,
      r.copySeconds.toFixed(1),
      Math.round(r.recordsCopied / r.copySeconds).toLocaleString("en"),
      (bytes / MiB / r.copySeconds).toFixed(1),
      r.verifySeconds.toFixed(1),
      Math.round((2 * records) / r.verifySeconds).toLocaleString("en"),
      (r.copySeconds / floorSeconds).toFixed(1),
    ]);
  };
  await run("SQLite -> Redis", src, `${redis.url}/0`);
  await run("Redis -> SQLite", `${redis.url}/0`, `sqlite:${join(dir, "back.sqlite")}`);
  await run("SQLite -> SQLite", src, `sqlite:${join(dir, "copy.sqlite")}`);
  console.log("\n| copy | copy s | records/s | payload MiB/s | verify s | records/s verified (both sides) | copy time / floor |");
  console.log("|---|---|---|---|---|---|---|");
  for (const r of rows) console.log(`| ${r.join(" | ")} |`);
} finally {
  await redis.stop();
  if (process.env.BENCH_COPY_DIR === undefined) rmSync(dir, { recursive: true, force: true });
}
