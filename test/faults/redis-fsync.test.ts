import { afterAll, describe, expect, test } from "vitest";
import { randomBytes } from "node:crypto";
import { Code, ConnectError } from "@connectrpc/connect";
import { startServer, waitForLog, type ServerProcess } from "../helpers/server.js";
import { spawnRedis, type SpawnedRedis } from "../helpers/redis-server.js";
import { writeClients, WRITE_KINDS, type WriteClients, type WriteKind } from "../helpers/durable-writes.js";
import { missingPrerequisite } from "../helpers/prerequisite.js";
import { ackAfterSync, answeredAfterStoreSync, holdsHttp2Headers, traceSyscalls, traceUnavailable, type Syscall } from "../helpers/syscall-trace.js";

/**
 * A Delete of a session just saved: its result is not used, so only a trace
 * can tell whether its answer waited for Redis (the Save's record is checked
 * as its own call).
 */
const SAVE_THEN_DELETE: WriteKind = {
  name: "Save then Delete",
  write: async (c, m) => {
    await WRITE_KINDS[0]!.write(c, m);
    await c.sessions.delete({ sessionId: m });
  },
  visible: (c, m) => WRITE_KINDS[0]!.visible(c, m),
};
const KINDS = [...WRITE_KINDS, SAVE_THEN_DELETE];

/**
 * "OK means durable" on Redis (docs/DESIGN.md principle 1, issue 15): with
 * `appendfsync always`, redis-server fsyncs its AOF before it answers, and
 * the driver answers its client only after Redis answered: one strace of
 * both processes shows every acknowledged call's answer (the driver's write
 * to the client's connection) after redis-server's fsync of the AOF records
 * written for it. When the fsync policy changes under a running server, the
 * durability watch must stop the driver from acknowledging writes until it
 * is `always` again.
 */
describe("Redis: an acknowledged write is in an fsynced AOF", () => {
  let redis: SpawnedRedis | undefined;
  let server: ServerProcess | undefined;
  afterAll(async () => {
    await server?.stop();
    await redis?.stop();
  });

  const marker = (label: string) => `mk-${label}-${randomBytes(4).toString("hex")}`;

  /** Runs every kind of write once; returns each marker with its status code name ("OK" when acknowledged). */
  async function writeEveryKind(clients: WriteClients, phase: string): Promise<Array<{ m: string; kind: WriteKind; code: string }>> {
    const out = [];
    for (const kind of KINDS) {
      const m = marker(`${kind.name}-${phase}`);
      const code = await kind.write(clients, m).then(
        () => "OK",
        (err: unknown) => Code[ConnectError.from(err).code]!,
      );
      out.push({ m, kind, code });
    }
    return out;
  }

  test("each acknowledged write is answered to the client after redis-server's fsync of the AOF; after CONFIG SET appendfsync everysec writes are refused until it is always again", async (ctx) => {
    const unavailable = traceUnavailable();
    if (unavailable !== undefined) return missingPrerequisite(ctx, unavailable);
    redis = await spawnRedis();
    server = await startServer(["--store", redis.url]);
    const clients = writeClients(server.address);
    await clients.sessions.capabilities({});
    const admin = redis.client();
    // One trace of both processes: their calls are ordered against each other.
    const trace = await traceSyscalls([redis.pid, server.proc.pid!], ["read", "write", "writev", "fsync", "fdatasync"]);
    let calls: Syscall[];
    let durable: Awaited<ReturnType<typeof writeEveryKind>>;
    let weakened: Awaited<ReturnType<typeof writeEveryKind>>;
    let restored: Awaited<ReturnType<typeof writeEveryKind>>;
    try {
      durable = await writeEveryKind(clients, "always");

      let from = server.stderr.length;
      await admin.config("SET", "appendfsync", "everysec");
      // The watch's periodic check (every 5 s) is the signal; no connection is dropped.
      await waitForLog(server, "store cannot take writes; health is NOT_SERVING", { from, timeoutMs: 10_000 });
      weakened = await writeEveryKind(clients, "everysec");

      from = server.stderr.length;
      await admin.config("SET", "appendfsync", "always");
      // Dropping the driver's connections makes it check again at once instead of within 5 s.
      await admin.client("KILL", "TYPE", "normal", "SKIPME", "yes");
      await waitForLog(server, "store takes writes again; health is SERVING", { from, timeoutMs: 10_000 });
      restored = await writeEveryKind(clients, "always-again");
    } finally {
      calls = await trace.stop();
      admin.disconnect();
    }

    expect(durable.map((w) => `${w.kind.name} ${w.code}`)).toEqual(KINDS.map((k) => `${k.name} OK`));
    expect(restored.map((w) => `${w.kind.name} ${w.code}`)).toEqual(KINDS.map((k) => `${k.name} OK`));
    expect(weakened.filter((w) => w.code === "OK").map((w) => w.kind.name)).toEqual([]);
    // A write refused because Redis is not durable is UNAVAILABLE, not INTERNAL (issue 9).
    expect(weakened.map((w) => w.code)).toEqual(KINDS.map(() => "Unavailable"));

    const aof = (c: Syscall) => /appendonly\.aof\.\d+\.incr\.aof$/.test(c.target ?? "");
    const rules = {
      isStore: (c: Syscall) => (c.name === "write" || c.name === "writev") && aof(c),
      // Redis's main thread syncs itself under "always"; a background thread's fsync (everysec) does not count.
      isSync: (c: Syscall) => (c.name === "fdatasync" || c.name === "fsync") && aof(c) && c.result === "0",
      isReply: (c: Syscall) => c.name === "write" || c.name === "writev",
    };
    const acked = [...durable, ...weakened, ...restored].filter((w) => w.code === "OK");
    // redis-server answers the driver only after its fsync...
    const byRedis = acked.filter((w) => w.kind !== SAVE_THEN_DELETE);
    expect(byRedis.map((w) => ackAfterSync(calls, w.m, rules) ?? "synced before answered")).toEqual(byRedis.map(() => "synced before answered"));
    // ...and the driver answers its client (HEADERS on the connection to its listening port) only after that fsync.
    const port = server.address.slice(server.address.lastIndexOf(":") + 1);
    const client = (c: Syscall) => c.target?.startsWith(`TCP:[127.0.0.1:${port}->`) === true;
    const relayed = {
      isRequest: (c: Syscall) => c.name === "read" && client(c),
      isReply: (c: Syscall) => (c.name === "write" || c.name === "writev") && client(c) && holdsHttp2Headers(c.data),
      isStore: rules.isStore,
      isSync: rules.isSync,
    };
    expect(acked.map((w) => `${w.kind.name}: ${answeredAfterStoreSync(calls, w.m, relayed) ?? "synced before answered"}`)).toEqual(acked.map((w) => `${w.kind.name}: synced before answered`));

    // A refused write never reached Redis and is not in the store.
    const refused = weakened.filter((w) => w.code !== "OK");
    expect(refused.filter((w) => calls.some((c) => rules.isStore(c) && c.data.includes(Buffer.from(w.m)))).map((w) => w.kind.name)).toEqual([]);
    const visible = [];
    for (const w of refused) if (await w.kind.visible(clients, w.m)) visible.push(w.kind.name);
    expect(visible).toEqual([]);
  });
});
