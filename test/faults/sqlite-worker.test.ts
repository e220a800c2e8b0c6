import { afterEach, describe, expect, test } from "vitest";
import Database from "better-sqlite3";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import { MAIN } from "../helpers/server.js";
import { mountSmallFilesystem } from "../helpers/tmpfs.js";
import { missingPrerequisite } from "../helpers/prerequisite.js";

/**
 * The SQLite worker's group commit under faults (issue 9; README Failures),
 * driven through `SqliteDatabase` in this process: the built module (its
 * worker thread runs the built `sqlite-worker.js`), a real database file, and
 * a second connection or a full file system as the fault. In process, because
 * the order of the writes in one group commit and the busy timeout (longer
 * than `--store-timeout` here) must be chosen exactly.
 */
const { SqliteDatabase } = (await import(pathToFileURL(join(dirname(MAIN), "../storage/sqlite-database.js")).href)) as typeof import("../../services/storage/sqlite-database.js");
const { projectSnapshot } = (await import(pathToFileURL(join(dirname(MAIN), "../session-store/projection.js")).href)) as typeof import("../../services/session-store/projection.js");
type Db = Awaited<ReturnType<typeof SqliteDatabase.open>>;

/** A Save of `bytes` bytes (not a sessnap object, so projected as id, time and size only), as the session store sends it. */
const save = (db: Db, sessionId: string, bytes: number) => {
  const payload = new Uint8Array(bytes).fill(0x61);
  return db.call("session.save", { sessionId, snapshot: { format: "sessnap-json/1", payload }, projection: projectSnapshot(sessionId, payload, "") });
};
/** The StoreFailure kind a call failed with ("OK" when it succeeded). */
const outcomes = async (calls: Array<Promise<unknown>>) =>
  (await Promise.allSettled(calls)).map((r) => (r.status === "fulfilled" ? "OK" : String((r.reason as { kind?: string }).kind ?? (r.reason as Error).message)));

describe("the SQLite worker", () => {
  const cleanups: Array<() => unknown> = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });
  async function open(path: string, options: { storeTimeoutMs: number; busyTimeoutMs?: number }): Promise<Db> {
    const db = await SqliteDatabase.open({ path, ...options });
    cleanups.push(() => db.close());
    return db;
  }

  test("a write whose --store-timeout passed while BEGIN IMMEDIATE waited for another process's lock is dropped, not applied late", async () => {
    const dir = mkdtempSync(join(tmpdir(), "mecatl-worker-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const path = join(dir, "store.sqlite");
    // The lock wait outlasts the call's deadline (the server keeps it at ¾ of --store-timeout; a stalled file system need not).
    const db = await open(path, { storeTimeoutMs: 1000, busyTimeoutMs: 60_000 });
    await save(db, "warm", 1);

    const holder = new Database(path);
    cleanups.push(() => holder.close());
    holder.exec("BEGIN IMMEDIATE");
    const late = save(db, "late", 1);
    // Not started (its BEGIN IMMEDIATE still waits): cancelled at the deadline, so the caller hears nothing was written.
    expect(await outcomes([late])).toEqual(["unreachable"]);
    // The caller has its answer; now the worker's BEGIN IMMEDIATE gets the lock.
    holder.exec("ROLLBACK");
    // One worker answers in order: this write is answered after the late one was dropped or applied.
    await save(db, "after", 1);
    expect(await db.call("session.load", { sessionId: "late" })).toBeUndefined();
    expect(await db.call("session.load", { sessionId: "after" })).toBeDefined();
  });

  test("a write after which SQLite rolled the whole group back (SQLITE_FULL mid-transaction) fails every write of the group; none is stored", async (ctx) => {
    const fs = mountSmallFilesystem(8);
    if (typeof fs === "string") return missingPrerequisite(ctx, fs);
    cleanups.push(() => fs.remove());
    const db = await open(join(fs.dir, "store.sqlite"), { storeTimeoutMs: 10_000 });
    await save(db, "kept", 1);

    fs.fill();
    // Calls made in one turn go to the worker in one message, so they form one group commit, in this
    // order: the small write fits in the page cache; the 20 MiB one outgrows the cache (16 MB, better-sqlite3's
    // default) and spills it to the WAL mid-transaction, which the full disk refuses, and SQLite rolls the
    // whole transaction back, the small write with it. (A write that fits in the cache fails at COMMIT instead.)
    const small = save(db, "small", 16);
    const big = save(db, "big", 20 * 1024 * 1024);
    expect(await outcomes([small, big])).toEqual(["disk_full", "disk_full"]);

    fs.free();
    expect(await db.call("session.load", { sessionId: "small" })).toBeUndefined();
    expect(await db.call("session.load", { sessionId: "big" })).toBeUndefined();
    expect(await db.call("session.load", { sessionId: "kept" })).toBeDefined();
  });
});
