import { afterEach, describe, expect, test } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import Database from "better-sqlite3";
import { Code, ConnectError } from "@connectrpc/connect";
import { logEntries, startServer, waitForLog, type ServerProcess } from "../helpers/server.js";
import { writeClients, WRITE_KINDS, type WriteClients } from "../helpers/durable-writes.js";
import { ackAfterSync, holdsHttp2Headers, traceSyscalls, traceUnavailable, type Syscall } from "../helpers/syscall-trace.js";
import { mountSmallFilesystem } from "../helpers/tmpfs.js";
import { missingPrerequisite } from "../helpers/prerequisite.js";

/**
 * "OK means durable" on SQLite (docs/DESIGN.md principle 1, issue 15), shown on
 * the running server rather than assumed: the settings its connection
 * reports, the order of its system calls, and what a failed COMMIT or BEGIN
 * leaves behind.
 */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function serve(store: string, flags: string[] = []): Promise<ServerProcess> {
  const server = await startServer(["--store", store, ...flags]);
  cleanups.push(() => server.stop());
  return server;
}

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "mecatl-durable-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A marker unique to this run, so the trace and the store are searched for exactly one write. */
const marker = (label: string) => `mk-${label}-${randomBytes(4).toString("hex")}`;

/** Settles every write, returning each one's status code name ("OK" when acknowledged). */
async function outcomes(writes: Array<Promise<unknown>>): Promise<string[]> {
  return (await Promise.allSettled(writes)).map((r) => (r.status === "fulfilled" ? "OK" : Code[ConnectError.from(r.reason).code]!));
}

async function visibleMarkers(c: WriteClients, markers: Array<{ kind: (typeof WRITE_KINDS)[number]; m: string }>): Promise<string[]> {
  const seen: string[] = [];
  for (const { kind, m } of markers) if (await kind.visible(c, m)) seen.push(`${kind.name} ${m}`);
  return seen;
}

describe("SQLite: an acknowledged write is on stable storage", () => {
  test("the live connection reports journal_mode=wal and synchronous=full; sqlite::memory: says it is not durable", async () => {
    const file = await serve(`sqlite:${join(tempDir(), "store.sqlite")}`);
    expect(logEntries(file, "listening").map((l) => [l.entry.journalMode, l.entry.synchronous])).toEqual([["wal", "full"]]);
    expect(logEntries(file, "writes are NOT durable: an acknowledged write can be lost")).toEqual([]);

    const memory = await serve("sqlite::memory:");
    expect(logEntries(memory, "listening").map((l) => [l.entry.journalMode, l.entry.synchronous])).toEqual([["memory", "off"]]);
    expect(logEntries(memory, "writes are NOT durable: an acknowledged write can be lost").map((l) => l.entry.durability)).toEqual(["none"]);
  });

  test("every kind of write is answered only after its WAL frames were fsynced (syscall trace)", async (ctx) => {
    const unavailable = traceUnavailable();
    if (unavailable !== undefined) return missingPrerequisite(ctx, unavailable);
    const dir = tempDir();
    const server = await serve(`sqlite:${join(dir, "store.sqlite")}`);
    const clients = writeClients(server.address);
    // Connections are set up (and the schema read) before tracing, so the trace holds the writes alone.
    await clients.sessions.capabilities({});
    const trace = await traceSyscalls(server.proc.pid!, ["read", "write", "writev", "pwrite64", "pwritev", "fsync", "fdatasync"]);
    const writes: string[] = [];
    let calls: Syscall[];
    try {
      // Three rounds of every kind, one at a time: each is its own group commit.
      for (let round = 0; round < 3; round++) {
        for (const kind of WRITE_KINDS) {
          const m = marker(`${kind.name}${round}`);
          await kind.write(clients, m);
          writes.push(m);
        }
      }
    } finally {
      calls = await trace.stop();
    }
    const database = join(dir, "store.sqlite");
    const rules = {
      isStore: (c: Syscall) => (c.name === "pwrite64" || c.name === "pwritev") && c.target === `${database}-wal`,
      isSync: (c: Syscall) => (c.name === "fsync" || c.name === "fdatasync") && c.target?.startsWith(database) === true && c.result === "0",
      // An HTTP/2 response starts with a HEADERS frame.
      isReply: (c: Syscall) => (c.name === "write" || c.name === "writev") && holdsHttp2Headers(c.data),
    };
    expect(writes.map((m) => ackAfterSync(calls, m, rules) ?? "synced before answered")).toEqual(writes.map(() => "synced before answered"));
  });

  test("a COMMIT that fails on a full disk answers an error to every write of the batch; none is visible, then or after a restart", async (ctx) => {
    const fs = mountSmallFilesystem(4);
    if (typeof fs === "string") return missingPrerequisite(ctx, fs);
    cleanups.push(() => fs.remove());
    const store = `sqlite:${join(fs.dir, "store.sqlite")}`;
    let server = await serve(store);
    let clients = writeClients(server.address);
    const kept = marker("before-full");
    await WRITE_KINDS[0]!.write(clients, kept);

    fs.fill();
    // Sent together so that the worker commits them in one or a few group commits; 64 KiB each
    // grows the WAL (the only file that must grow at COMMIT), which the full disk refuses.
    const batch = WRITE_KINDS.flatMap((kind) => [0, 1].map((i) => ({ kind, m: marker(`${kind.name}-full-${i}`) })));
    const codes = await outcomes(batch.map(({ kind, m }) => kind.write(clients, m, 64 * 1024)));
    expect(codes.filter((c) => c === "OK")).toEqual([]);
    // A full disk is RESOURCE_EXHAUSTED, not INTERNAL (issue 9).
    expect(new Set(codes)).toEqual(new Set(["ResourceExhausted"]));

    // Looking needs no space, but the lease probe writes: look once the disk has room again.
    fs.free();
    expect(await visibleMarkers(clients, batch)).toEqual([]);
    await server.stop();
    server = await serve(store);
    clients = writeClients(server.address);
    expect(await visibleMarkers(clients, batch)).toEqual([]);
    expect(await WRITE_KINDS[0]!.visible(clients, kept)).toBe(true);
    // The store works again once there is room.
    const after = marker("after-free");
    await WRITE_KINDS[0]!.write(clients, after, 64 * 1024);
    expect(await WRITE_KINDS[0]!.visible(clients, after)).toBe(true);
  });

  test("a BEGIN IMMEDIATE that cannot get the write lock answers an error to every write; none is visible", async () => {
    const path = join(tempDir(), "store.sqlite");
    const server = await serve(`sqlite:${path}`, ["--store-timeout", "1s"]);
    const clients = writeClients(server.address);
    await WRITE_KINDS[0]!.write(clients, marker("warm-up"));

    // Another process (this test) holds the write lock past the server's busy timeout.
    const holder = new Database(path);
    cleanups.push(() => holder.close());
    holder.exec("BEGIN IMMEDIATE");
    const batch = WRITE_KINDS.map((kind) => ({ kind, m: marker(`${kind.name}-locked`) }));
    const codes = await outcomes(batch.map(({ kind, m }) => kind.write(clients, m)));
    holder.exec("ROLLBACK");
    expect(codes.filter((c) => c === "OK")).toEqual([]);
    // A store that stays busy is UNAVAILABLE, not INTERNAL (issue 9).
    expect(new Set(codes)).toEqual(new Set(["Unavailable"]));
    // A write acknowledged after the lock is released comes after anything the worker still held queued.
    await WRITE_KINDS[0]!.write(clients, marker("after-unlock"));
    expect(await visibleMarkers(clients, batch)).toEqual([]);
  });
});
