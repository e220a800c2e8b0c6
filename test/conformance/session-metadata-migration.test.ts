/**
 * Upgrading a store written by main before issue 12: opening it gives every
 * stored session its metadata row and lineage record from its payload.
 * - SQLite: the schema-2 migration (services/session-store/sqlite-metadata.ts);
 *   the old store is built from the old schema (test/fixtures/session-store-v1.sql).
 * - Redis: the start-up backfill (services/session-store/redis-metadata.ts);
 *   the old store holds exactly the keys main's Save script wrote.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { type Client } from "@connectrpc/connect";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { principalScopeHash } from "../../common/principal-scope.js";
import { legacyIncarnation } from "../../common/incarnation.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { spawnRedis } from "../helpers/redis-server.js";
import { DEFAULT_KEYS } from "../helpers/backends.js";
import { grpcClient } from "../helpers/clients.js";
import { newIncarnation, sessnap } from "../helpers/sessnap.js";

const FIXTURE = join(import.meta.dirname, "../fixtures/session-store-v1.sql");
const alice = { Issuer: "https://issuer.example", Subject: "alice" };
const T = 1_780_000_000_000_000; // microseconds
const rootInc = newIncarnation();
const childInc = newIncarnation();

/** The sessions an old build stored: [id, payload, modified_us]. */
const OLD: Array<[string, Uint8Array, number]> = [
  ["root", sessnap({ id: "root", kind: "main", owner: alice, incarnation: rootInc, messages: [{ role: "user", text: "go" }] }), T + 5],
  ["child", sessnap({ id: "child", kind: "subagent", relationship: { parent_session_id: "root", parent_incarnation: rootInc, call_id: "c1" }, owner: alice, incarnation: childInc }), T + 4],
  ["legacy", sessnap({ id: "legacy", incarnation: "", createdAt: "1970-01-01T00:00:01Z" }), T + 3],
  ["tie-b", sessnap({ id: "tie-b", owner: alice }), T + 2],
  ["tie-a", sessnap({ id: "tie-a", owner: alice }), T + 2],
  ["opaque", Buffer.from("opaque bytes"), T + 1],
  ["mismatch", sessnap({ id: "someone-else" }), T],
];

/** A store as main left it: where it lives, how to seed it, how to check the layout version afterwards. */
interface OldStore {
  name: string;
  store: string;
  seed(): Promise<void>;
  migrated(): Promise<string>;
  teardown(): Promise<void>;
}

async function oldSqlite(): Promise<OldStore> {
  const dir = mkdtempSync(join(tmpdir(), "mecatl-migrate-"));
  const path = join(dir, "store.sqlite");
  return {
    name: "sqlite-file",
    store: `sqlite:${path}`,
    async seed() {
      const old = new Database(path);
      old.exec(readFileSync(FIXTURE, "utf8"));
      const insert = old.prepare("INSERT INTO sessions (session_id, format, payload, modified_us) VALUES (?, 'sessnap-json/1', ?, ?)");
      for (const [id, payload, at] of OLD) insert.run(id, payload, at);
      old.close();
    },
    async migrated() {
      const db = new Database(path, { readonly: true });
      const row = db.prepare("SELECT version FROM schema_migrations WHERE component = 'session-store'").get() as { version: number };
      db.close();
      return `schema ${row.version}`;
    },
    async teardown() {
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function oldRedis(): Promise<OldStore> {
  const redis = await spawnRedis();
  const base = "mecatl-drivers:v1:";
  return {
    name: "redis",
    store: redis.url,
    async seed() {
      // What main's Save script wrote: the snapshot hash and the List index entry.
      const c = redis.client();
      for (const [id, payload, at] of OLD) {
        await c.hset(`${base}session:{${id}}:snapshot`, "format", "sessnap-json/1", "payload", Buffer.from(payload), "modified_us", String(at));
        await c.zadd(`${base}sessions`, at, id);
      }
      c.disconnect();
    },
    async migrated() {
      const c = redis.client();
      // The metadata layout version is recorded in the store's configuration (key layout v2 since issue 13).
      const v = await c.hget(DEFAULT_KEYS.config(), "migrated");
      c.disconnect();
      return `layout ${v}`;
    },
    teardown: () => redis.stop(),
  };
}

describe.each([
  { name: "sqlite-file", open: oldSqlite, migrated: "schema 3" },
  { name: "redis", open: oldRedis, migrated: "layout 1" },
])("migration of a $name store written before issue 12", ({ open, migrated }) => {
  let old: OldStore;
  let server: ServerProcess;
  let client: Client<typeof SessionStoreService>;

  beforeAll(async () => {
    old = await open();
    await old.seed();
    server = await startServer(["session-store", "--store", old.store]);
    client = grpcClient(SessionStoreService, server.address);
  });
  afterAll(async () => {
    await server?.stop();
    await old?.teardown();
  });

  test("every stored session gets its metadata row, in page order with ties by id", async () => {
    const p = await client.pageMetadata({ limit: 100 });
    expect(p.totalCount).toBe(OLD.length);
    expect(p.sessions.map((s) => s.sessionId)).toEqual(["root", "child", "legacy", "tie-a", "tie-b", "opaque", "mismatch"]);
    const row = new Map(p.sessions.map((s) => [s.sessionId, s]));
    expect(row.get("root")).toMatchObject({ kind: "main", hasOwner: true, ownerSubject: "alice", activityState: "active", state: "idle" });
    expect(row.get("child")).toMatchObject({ kind: "subagent", parentSessionId: "root", parentIncarnation: rootInc, activityState: "draft" });
    expect(row.get("legacy")).toMatchObject({ kind: "unknown", hasOwner: false });
    // Payloads today's Save would refuse or cannot read are kept as id, save time and size.
    for (const id of ["opaque", "mismatch"]) expect(row.get(id)).toMatchObject({ kind: "", state: "", hasOwner: false, activityState: "" });
    expect(row.get("opaque")!.estimatedBytes).toBe(12n);
    expect(p.sessions.map((s) => s.modifiedAt!.seconds * 1_000_000n + BigInt(s.modifiedAt!.nanos / 1000))).toEqual(OLD.map(([, , at]) => BigInt(at)).sort((a, b) => Number(b - a)));

    const owned = await client.pageMetadata({ limit: 2, ownershipEnforced: true, ownerIssuer: alice.Issuer, ownerSubject: alice.Subject });
    expect([owned.totalCount, owned.sessions.map((s) => s.sessionId)]).toEqual([4, ["root", "child"]]);
    const next = await client.pageMetadata({ limit: 2, ownershipEnforced: true, ownerIssuer: alice.Issuer, ownerSubject: alice.Subject, cursor: owned.nextCursor });
    expect([next.sessions.map((s) => s.sessionId), next.nextCursor]).toEqual([["tie-a", "tie-b"], undefined]);
  });

  test("every sessnap session gets its retained lineage record; legacy ones get the derived incarnation", async () => {
    const r = await client.readLineage({ rootSessionId: "root", rootIncarnation: rootInc, limit: 10 });
    expect(r.records.map((x) => [x.sessionId, x.incarnation, x.state])).toEqual([
      ["root", rootInc, "retained"],
      ["child", childInc, "retained"],
    ]);
    expect(Buffer.from(r.records[1]!.ownerScope).equals(principalScopeHash({ issuer: alice.Issuer, subject: alice.Subject }))).toBe(true);
    const legacy = legacyIncarnation("legacy", 1_000_000_000n, principalScopeHash(undefined));
    const l = await client.readLineage({ rootSessionId: "legacy", rootIncarnation: legacy, limit: 1 });
    expect(l.records.map((x) => [x.sessionId, x.incarnation, x.kind])).toEqual([["legacy", legacy, "unknown"]]);
  });

  test("tombstones survive a restart and reuse of the id; the migration runs once", async () => {
    await client.delete({ sessionId: "child" });
    await server.stop();
    server = await startServer(["session-store", "--store", old.store]);
    client = grpcClient(SessionStoreService, server.address);
    const childInc2 = newIncarnation();
    await client.create({
      sessionId: "child",
      snapshot: { format: "sessnap-json/1", payload: sessnap({ id: "child", kind: "subagent", relationship: { parent_session_id: "root", parent_incarnation: rootInc, call_id: "c2" }, incarnation: childInc2 }) },
    });
    const r = await client.readLineage({ rootSessionId: "root", rootIncarnation: rootInc, limit: 10 });
    expect(r.records.map((x) => [x.sessionId, x.incarnation, x.state, x.deletedAt !== undefined])).toEqual([
      ["root", rootInc, "retained", false],
      ["child", childInc2, "retained", false],
      ["child", childInc, "pruned", true],
    ]);
    expect(await old.migrated()).toBe(migrated);
    expect((await client.pageMetadata({ limit: 100 })).totalCount).toBe(OLD.length);
  });
});

