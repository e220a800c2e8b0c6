/**
 * PageMetadata benchmark (issue 12): one page of 25 rows over a store of
 * 100,000 sessions, on an SQLite file and on a spawned durable redis-server,
 * one call in flight, against the transport floor (a bare grpc-js server
 * answering a message of the same size with no work) in the same run.
 *
 * The store is filled the fast way: small sessnap payloads (spread over 1,000
 * owners) are written in the layout main used before issue 12 (SQLite
 * schema 1 rows; Redis snapshot hashes and List entries), and the driver's
 * start-up migration gives them their metadata rows and lineage records; the
 * migration's duration is reported too. Cases: the first page of all
 * sessions; a page deep inside (the cursor of page 2,000); the first page of
 * one owner. Each page is also checked: 25 rows, the right total, a bound
 * next cursor.
 *
 * Run: npx tsc -p tsconfig.json && node dist/bench/session-metadata-page.js [sessions] [seconds-per-case]
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import Database from "better-sqlite3";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { toBinary, type MessageShape } from "@bufbuild/protobuf";
import { PageSessionMetadataResponseSchema, SessionStoreService } from "../gen/mecatl/driver/v1/session_store_pb.js";
import { MAIN, startServer } from "../test/helpers/server.js";
import { spawnRedis, type SpawnedRedis } from "../test/helpers/redis-server.js";
import { rawGrpcClient, rawUnary } from "../test/helpers/raw-grpc.js";
import { sessnap } from "../test/helpers/sessnap.js";
import { startTransportFloor } from "./lib/floor.js";
import { fmt, measure } from "./lib/measure.js";

/** The project root (the benchmark runs from dist/bench). */
const projectRoot = () => join(MAIN, "../../../..");

const SESSIONS = Number(process.argv[2] ?? 100_000);
const SECONDS = Number(process.argv[3] ?? 3);
const OWNERS = 1000;
const LIMIT = 25;

type Page = MessageShape<typeof PageSessionMetadataResponseSchema>;

function owner(i: number) {
  return { Issuer: "https://issuer.example", Subject: `user-${i % OWNERS}` };
}

function payloadOf(i: number): { id: string; payload: Uint8Array; micros: number } {
  const id = `bench-${String(i).padStart(6, "0")}`;
  const payload = sessnap({ id, owner: owner(i), kind: "main", title: `session ${i}`, messages: [{ role: "user", text: "go" }] });
  return { id, payload, micros: 1_780_000_000_000_000 + i * 1000 };
}

/** Writes the sessions as main's SQLite store held them (schema 1; test/fixtures/session-store-v1.sql). */
function fillSqliteV1(path: string): void {
  const db = new Database(path);
  db.exec(readFileSync(join(projectRoot(), "test/fixtures/session-store-v1.sql"), "utf8"));
  const insert = db.prepare("INSERT INTO sessions (session_id, format, payload, modified_us) VALUES (?, 'sessnap-json/1', ?, ?)");
  db.transaction(() => {
    for (let i = 0; i < SESSIONS; i++) {
      const s = payloadOf(i);
      insert.run(s.id, s.payload, s.micros);
    }
  })();
  db.close();
}

/** Writes the sessions as main's Redis store held them: snapshot hashes and List index entries. */
async function fillRedisV1(redis: SpawnedRedis): Promise<void> {
  const c = redis.client();
  for (let from = 0; from < SESSIONS; from += 1000) {
    const p = c.pipeline();
    for (let i = from; i < Math.min(SESSIONS, from + 1000); i++) {
      const s = payloadOf(i);
      p.hset(`mecatl-drivers:v1:session:{${s.id}}:snapshot`, "format", "sessnap-json/1", "payload", Buffer.from(s.payload), "modified_us", String(s.micros));
      p.zadd("mecatl-drivers:v1:sessions", s.micros, s.id);
    }
    await p.exec();
  }
  c.disconnect();
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), "mecatl-bench-"));
  const floor = await startTransportFloor();
  const redis = await spawnRedis();
  const sqlitePath = join(dir, "driver.sqlite");
  const targets = [
    { name: "sqlite", args: ["--store", `sqlite:${sqlitePath}`], fill: async () => fillSqliteV1(sqlitePath) },
    { name: "redis", args: ["--store", redis.url], fill: () => fillRedisV1(redis) },
  ];
  const lines: string[] = [];
  const migrations: string[] = [];
  let pageBytes = 0;
  for (const t of targets) {
    await t.fill();
    process.stderr.write(`${t.name}: migrating ${SESSIONS} sessions\n`);
    const started = Date.now();
    const server = await startServer(["session-store", ...t.args, "--log-level", "warn"]);
    const client = rawGrpcClient(SessionStoreService, server.address);
    const page = (req: object) => rawUnary(client, SessionStoreService.method.pageMetadata, { limit: LIMIT, ...req }) as Promise<Page>;
    // Both migrations (SQLite schema 2, the Redis backfill) run before the server listens.
    await page({});
    migrations.push(`${t.name} ${((Date.now() - started) / 1000).toFixed(1)} s`);
    // The cursor of page 2,000 (or the middle of a smaller store): walk there once.
    let deep = (await page({})).nextCursor;
    for (let i = 1; i < Math.min(2000, SESSIONS / LIMIT / 2); i++) deep = (await page({ cursor: deep })).nextCursor;
    const byOwner = { ownershipEnforced: true, ownerIssuer: owner(7).Issuer, ownerSubject: owner(7).Subject };
    const cases = [
      { name: "first page, all sessions", req: {}, total: SESSIONS },
      { name: "deep page, all sessions", req: { cursor: deep }, total: SESSIONS },
      { name: "first page, one owner", req: byOwner, total: SESSIONS / OWNERS },
    ];
    for (const c of cases) {
      const check = await page(c.req);
      if (check.sessions.length !== Math.min(LIMIT, c.total) || check.totalCount !== c.total || (c.total > LIMIT) !== (check.nextCursor !== undefined)) throw new Error(`${c.name}: unexpected page (${check.sessions.length} rows, total ${check.totalCount})`);
      pageBytes = toBinary(PageSessionMetadataResponseSchema, check).length;
      const r = await measure(() => page(c.req), 1, SECONDS * 1000);
      const f = await measure(() => floor.source(pageBytes), 1, SECONDS * 1000);
      process.stderr.write(`  ${c.name}: p50 ${fmt(r.p50Ms)} ms p99 ${fmt(r.p99Ms)} ms (floor p50 ${fmt(f.p50Ms)} ms)\n`);
      lines.push(`| ${t.name} | ${c.name} | ${fmt(r.p50Ms)} | ${fmt(r.p99Ms)} | ${fmt(r.perSecond)} | ${fmt(f.p50Ms)} | ${fmt(r.p50Ms / f.p50Ms, 2)} |`);
    }
    client.close();
    await server.stop();
  }
  floor.stop();
  await redis.stop();
  rmSync(dir, { recursive: true, force: true });
  console.log(`${SESSIONS} sessions, ${OWNERS} owners, pages of ${LIMIT} rows (~${pageBytes} bytes), 1 call in flight; start-up migration of the store: ${migrations.join(", ")}`);
  console.log("| backend | case | p50 ms | p99 ms | calls/s | floor p50 ms (same bytes) | ÷ floor p50 |");
  console.log("|---|---|---:|---:|---:|---:|---:|");
  for (const l of lines) console.log(l);
}

await main();
