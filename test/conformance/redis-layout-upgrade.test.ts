/**
 * Upgrading a Redis store written by the build before issue 13 (key layout
 * `v1:`: records hash-tagged by their own id, one global List, Due,
 * ListSchedules and ListFires index each, metadata partitions under `{m<p>}`)
 * to the partitioned layout `v2:` (services/storage/redis-upgrade.ts). The
 * old store is written with raw commands (and, for metadata rows, the Save
 * script run on the old key names, as the old build ran it); a server of
 * this build opens it and every record reads back through the RPCs, nothing
 * is left under `v1:`, and an upgrade stopped half-way (keys moved, others
 * not, a key present under both names, an index split only in part) is
 * completed by the next start.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Code } from "@connectrpc/connect";
import type { Redis } from "ioredis";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { EventLogService } from "../../gen/mecatl/driver/v1/event_log_pb.js";
import { SessionLeaseService } from "../../gen/mecatl/driver/v1/session_lease_pb.js";
import { ScheduleStoreService } from "../../gen/mecatl/driver/v1/schedule_store_pb.js";
import { RedisKeys } from "../../services/storage/redis-keys.js";
import { RedisOperations } from "../../services/storage/redis-operation.js";
import { runScript } from "../../services/storage/redis-script.js";
import { RedisSessionMetadata, SAVE_PROJECTED } from "../../services/session-store/redis-metadata.js";
import { projectStoredSnapshot } from "../../services/session-store/projection.js";
import { spawnRedis, type SpawnedRedis } from "../helpers/redis-server.js";
import { logEntries, startServer, type ServerProcess } from "../helpers/server.js";
import { grpcClient } from "../helpers/clients.js";
import { expectCode } from "../helpers/errors.js";
import { newIncarnation, sessnap } from "../helpers/sessnap.js";
import { EVENT_FORMAT, readBodies } from "../helpers/event-log.js";
import { fireRecord, iso, readFire, readSchedule, spec, state, T0 } from "../helpers/schedules.js";
import { runCli } from "../helpers/cli.js";
import { rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const V1_BASE = "mecatl-drivers:v1:";
const keys = new RedisKeys("mecatl-drivers:");
const alice = { Issuer: "https://issuer.example", Subject: "alice" };
const T = 1_780_000_000_000_000; // microseconds
const inc = newIncarnation();
const enc = new TextEncoder();

/** The v1 names of the keys the Save script takes (v2 names from RedisSessionMetadata.write). */
function v1SaveKeys(sessionId: string, v2: string[]): string[] {
  return v2.map((k, i) => {
    if (i === 0) return `${V1_BASE}session:{${sessionId}}:snapshot`;
    if (i === 1) return `${V1_BASE}sessions`;
    if (i === 9) return `${V1_BASE}session:{${sessionId}}:payload`;
    if (i === 10) return `${V1_BASE}session:{${sessionId}}:stage:0000000000000000`;
    return v1MetaKey(k);
  });
}

/** `mecatl-drivers:v2:session-meta:{<tag>}:<name>` to `mecatl-drivers:v1:session-meta:{m<p>}:<name>`. */
function v1MetaKey(k: string): string {
  const m = /^mecatl-drivers:v2:session-meta:\{([^}]*)\}:(.*)$/s.exec(k)!;
  const p = keys.layout.all().find((x) => keys.layout.tag(x) === m[1])!;
  return `${V1_BASE}session-meta:{m${p}}:${m[2]}`;
}

/**
 * Writes, with raw commands, what the build before issue 13 kept for: two
 * saved sessions with metadata rows and lineage (one owned), their event
 * logs, an event log without a session, a held lease, an operation record,
 * a due schedule and a disabled one, a fire record indexed under its
 * schedule, and the metadata configuration.
 */
async function seedV1(c: Redis): Promise<void> {
  const ops = new RedisOperations(c, 5000);
  const meta = new RedisSessionMetadata(ops, keys);
  const config = { partitions: keys.layout.partitions, storeId: "0123456789abcdef" };
  await c.hset(`${V1_BASE}session-meta:{m-config}`, "partitions", String(config.partitions), "store_id", config.storeId, "migrated", "1");
  const sessions: Array<[string, Uint8Array, number]> = [
    ["owned", sessnap({ id: "owned", kind: "main", owner: alice, incarnation: inc, messages: [{ role: "user", text: "hi" }] }), T + 2],
    ["plain", enc.encode("opaque bytes"), T + 1],
  ];
  for (const [id, payload, at] of sessions) {
    const { keys: v2, args } = meta.write(config, id, projectStoredSnapshot(id, payload), "0000000000000000");
    const argv = args(String(at), "");
    argv[0] = v1MetaKey(`${argv[0]}`);
    await runScript(c, SAVE_PROJECTED, v1SaveKeys(id, v2), [id, "sessnap-json/1", Buffer.from(payload), "import", ...argv], { key: `${V1_BASE}session:{${id}}:op:00000000000000${id.length}a`, ttlMs: 600_000 });
  }
  for (const id of ["owned", "events-only"]) {
    await c.hset(`${V1_BASE}session:{${id}}:events:meta`, "gen", "00112233aabbccdd", "n", "2");
    for (const n of [1, 2]) await c.xadd(`${V1_BASE}session:{${id}}:events`, `0-${n}`, "k", "e", "f", EVENT_FORMAT, "p", JSON.stringify({ seq: n, of: id }));
  }
  await c.hset(`${V1_BASE}session:{leased}:lease`, "owner", "holder", "token", "7", "expiry_us", String((Date.now() + 600_000) * 1000), "high_water", "7");
  const sched = (name: string, st: Parameters<typeof state>[0]) => JSON.stringify(state(st));
  await c.hset(`${V1_BASE}schedule:{due-one}`, "ver", "3", "spec", JSON.stringify(spec({ Name: "due-one" })), "owned", "0", "max_fires", "0", "state", sched("due-one", { NextFireAt: iso(T0), Enabled: true }));
  await c.hset(`${V1_BASE}schedule:{idle}`, "ver", "1", "spec", JSON.stringify(spec({ Name: "idle" })), "owned", "0", "max_fires", "0", "state", sched("idle", {}));
  await c.zadd(`${V1_BASE}schedules:by-name`, 0, "due-one", 0, "idle");
  await c.zadd(`${V1_BASE}schedules:due`, T0 * 1000, "due-one");
  const fire = new TextDecoder().decode(fireRecord({ ID: "fire-1", ScheduleName: "due-one", SessionID: "sched--1", Stop: "done" }).payload);
  await c.hset(`${V1_BASE}schedule-fire:{fire-1}`, "payload", fire, "ver", "1");
  await c.zadd(`${V1_BASE}schedule:{due-one}:fire-ids`, 0, "fire-1");
}

/** Every key under `v1:`. */
async function v1Keys(c: Redis): Promise<string[]> {
  return c.keys(`${V1_BASE}*`);
}

/** Checks every record of {@link seedV1} through the RPCs of `server`. */
async function expectSeeded(server: ServerProcess): Promise<void> {
  const sessions = grpcClient(SessionStoreService, server.address);
  const page = await sessions.pageMetadata({ limit: 10 });
  expect(page.sessions.map((s) => s.sessionId)).toEqual(["owned", "plain"]);
  expect(page.sessions[0]).toMatchObject({ kind: "main", hasOwner: true, ownerSubject: "alice" });
  expect((await sessions.list({})).sessions.map((s) => s.sessionId).sort()).toEqual(["owned", "plain"]);
  expect(new TextDecoder().decode((await sessions.load({ sessionId: "plain" })).snapshot!.payload)).toBe("opaque bytes");
  const lineage = await sessions.readLineage({ rootSessionId: "owned", rootIncarnation: inc, limit: 5 });
  expect(lineage.records.map((r) => [r.sessionId, r.incarnation, r.state])).toEqual([["owned", inc, "retained"]]);

  const events = grpcClient(EventLogService, server.address);
  for (const id of ["owned", "events-only"]) expect((await readBodies(events, id)).map((b) => [b.seq, b.of])).toEqual([[1, id], [2, id]]);

  const leases = grpcClient(SessionLeaseService, server.address);
  await expectCode(leases.acquire({ sessionId: "leased", owner: "other" }), Code.FailedPrecondition);
  const held = (await leases.acquire({ sessionId: "leased", owner: "holder" })).lease!;
  expect(held.token).toBe(7n);

  const schedules = grpcClient(ScheduleStoreService, server.address);
  expect((await schedules.listSchedules({})).schedules.map((s) => readSchedule(s).spec.Name).sort()).toEqual(["due-one", "idle"]);
  expect((await schedules.dueSchedules({ now: { seconds: BigInt(T0 + 60), nanos: 0 } })).schedules.map((s) => readSchedule(s).spec.Name)).toEqual(["due-one"]);
  expect(readSchedule((await schedules.loadSchedule({ name: "idle" })).schedule).state.Enabled).toBe(false);
  expect(readFire((await schedules.loadFire({ fireId: "fire-1" })).fire).Stop).toBe("done");
  expect((await schedules.listFires({ scheduleName: "due-one" })).fires.map((f) => readFire(f).ID)).toEqual(["fire-1"]);
}

describe("a Redis store written before issue 13 is upgraded to the partitioned key layout", () => {
  let redis: SpawnedRedis;
  let c: Redis;
  beforeAll(async () => {
    redis = await spawnRedis();
    c = redis.client();
  });
  afterAll(async () => {
    c?.disconnect();
    await redis?.stop();
  });

  test("every record reads back through the RPCs, writes continue where the old store left off, and no v1 key is left", async () => {
    await seedV1(c);
    const server = await startServer(["--store", redis.url]);
    try {
      expect(logEntries(server, "upgraded the Redis key layout")).toHaveLength(1);
      await expectSeeded(server);
      expect(await v1Keys(c)).toEqual([]);
      expect(await c.hmget(keys.config(), "partitions", "store_id", "layout", "migrated")).toEqual([String(keys.layout.partitions), "0123456789abcdef", "2", "1"]);
      // The event log keeps its generation and length: the next append is position 3 of the same log.
      const events = grpcClient(EventLogService, server.address);
      await events.append({ sessionId: "owned", event: { format: EVENT_FORMAT, payload: enc.encode('{"seq":3}') } });
      expect((await readBodies(events, "owned")).map((b) => b.seq)).toEqual([1, 2, 3]);
      const fires = grpcClient(ScheduleStoreService, server.address);
      await fires.recordFire({ fireId: "fire-2", fire: fireRecord({ ID: "fire-2", ScheduleName: "due-one", SessionID: "sched--2" }) });
      expect((await fires.listFires({ scheduleName: "due-one" })).fires.map((f) => readFire(f).ID)).toEqual(["fire-1", "fire-2"]);
    } finally {
      await server.stop();
    }
    // A second start finds the store upgraded and changes nothing.
    const again = await startServer(["--store", redis.url]);
    try {
      expect(logEntries(again, "upgrading the Redis key layout")).toEqual([]);
      expect((await grpcClient(SessionStoreService, again.address).list({})).sessions).toHaveLength(2);
    } finally {
      await again.stop();
    }
  });

  test("an upgrade stopped half-way is completed by the next start", async () => {
    await c.flushall();
    await seedV1(c);
    // The state a crash can leave: the store configured but not marked upgraded; one
    // key already moved, one present under both names (restored, not yet deleted),
    // and the List index split in part while the v1 index is still there.
    await c.hset(keys.config(), "partitions", String(keys.layout.partitions), "store_id", "0123456789abcdef", "migrated", "1");
    await c.rename(`${V1_BASE}session:{plain}:snapshot`, keys.snapshot("plain"));
    await c.restore(keys.schedule("idle"), 0, (await c.dumpBuffer(`${V1_BASE}schedule:{idle}`))!);
    await c.zadd(keys.sessionIndexOf("owned"), T + 2, "owned");
    const server = await startServer(["--store", redis.url]);
    try {
      await expectSeeded(server);
      expect(await v1Keys(c)).toEqual([]);
    } finally {
      await server.stop();
    }
  });

  test("copy refuses a source the old build wrote until a server has upgraded it", async () => {
    await c.flushall();
    await seedV1(c);
    const target = join(tmpdir(), `mecatl-never-${process.pid}.sqlite`);
    const r = await runCli(["copy", "--from", redis.url, "--to", `sqlite:${target}`]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain("upgrades the key layout");
    expect((await v1Keys(c)).length).toBeGreaterThan(0);
    rmSync(target, { force: true });
  });
});
