/**
 * Deleted data gives its space back on SQLite (issue 14, deliverable 7):
 * after about 50 MiB of sessions are deleted, the database file and its WAL
 * shrink to a few MiB (incremental auto-vacuum when the worker is idle,
 * then a truncating checkpoint), and the `free` bytes the metrics report
 * drop with them. A file created without auto-vacuum is switched by one
 * VACUUM when a server opens it, which the `listening` line reports.
 */
import { afterAll, expect, test } from "vitest";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import Database from "better-sqlite3";
import { startServer, waitForLog, type ServerProcess } from "../helpers/server.js";
import { METRICS_FLAGS, metricValue } from "../helpers/metrics.js";
import { writeClients } from "../helpers/durable-writes.js";
import { sessnap } from "../helpers/sessnap.js";
import { waitFor } from "../helpers/wait.js";

const MiB = 1024 * 1024;
const dir = mkdtempSync(join(tmpdir(), "mecatl-space-"));
const servers: ServerProcess[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => s.stop()));
  rmSync(dir, { recursive: true, force: true });
});

/** Bytes of the database file plus its WAL. */
function onDisk(path: string): number {
  const size = (p: string) => {
    try {
      return statSync(p).size;
    } catch {
      return 0;
    }
  };
  return size(path) + size(`${path}-wal`);
}

/** Saves `count` sessions of about 1 MiB each (768 KiB of random bytes, base64) named `prefix-N`, and returns their ids. */
async function saveLarge(c: ReturnType<typeof writeClients>, prefix: string, count: number): Promise<string[]> {
  const ids = Array.from({ length: count }, (_, i) => `${prefix}-${i}`);
  for (const id of ids) {
    const text = randomBytes(768 * 1024).toString("base64");
    await c.sessions.save({ sessionId: id, snapshot: { format: "sessnap-json/1", payload: sessnap({ id, messages: [{ role: "user", text }] }) } });
  }
  return ids;
}

test("deleting 50 MiB of sessions shrinks the file and the WAL, and the free bytes metric drops", async () => {
  const path = join(dir, "space.sqlite");
  const server = await startServer(["--store", `sqlite:${path}`, ...METRICS_FLAGS, "--store-size-interval", "200ms"]);
  servers.push(server);
  const c = writeClients(server.address);
  const ids = await saveLarge(c, "big", 50);
  expect(onDisk(path)).toBeGreaterThan(50 * MiB);
  for (const id of ids) await c.sessions.delete({ sessionId: id });
  await waitFor(() => onDisk(path) < 8 * MiB, 30_000, "the file and its WAL to shrink below 8 MiB");
  await waitFor(async () => (await metricValue(server.metricsAddress!, "mecatl_drivers_store_bytes", { kind: "free" })) < MiB, 10_000, "the free bytes metric to drop below 1 MiB");
  // The store still works, and keeps shrinking after further writes and deletes.
  await c.sessions.save({ sessionId: "after", snapshot: { format: "sessnap-json/1", payload: sessnap({ id: "after" }) } });
  expect((await c.sessions.load({ sessionId: "after" })).snapshot).toBeDefined();
}, 120_000);

test("the idle pass waits until the writer has had no write for a second: freed space stays while writes keep coming", async () => {
  const path = join(dir, "busy.sqlite");
  const server = await startServer(["--store", `sqlite:${path}`]);
  servers.push(server);
  const c = writeClients(server.address);
  const ids = await saveLarge(c, "freed", 20);
  for (const id of ids) await c.sessions.delete({ sessionId: id });
  const freed = onDisk(path);
  expect(freed).toBeGreaterThan(20 * MiB);
  // 3 s of small writes, one every 50 ms: the writer is never quiet for a second, so nothing is given back yet
  // (the idle pass's steps and truncating checkpoint would make these writes wait). Reads do not count: they do not reach the writer.
  const until = Date.now() + 3_000;
  for (let i = 0; Date.now() < until; i++) {
    await c.sessions.save({ sessionId: "small", snapshot: { format: "sessnap-json/1", payload: sessnap({ id: "small", messages: [{ role: "user", text: String(i) }] }) } });
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  expect(onDisk(path)).toBeGreaterThan(freed - 2 * MiB);
  await waitFor(() => onDisk(path) < 8 * MiB, 30_000, "the file and its WAL to shrink once calls stopped");
}, 120_000);

test("a new file has incremental auto-vacuum from the start: the listening line reports no VACUUM", async () => {
  const server = await startServer(["--store", `sqlite:${join(dir, "new.sqlite")}`]);
  servers.push(server);
  const listening = (await waitForLog(server, "listening")).entry;
  expect(listening.autoVacuum).toBe("incremental");
  expect(listening.vacuumMs).toBeUndefined();
  expect(listening.vacuumProblem).toBeUndefined();
});

test("a file created without auto-vacuum is switched by one VACUUM when a server opens it", async () => {
  const path = join(dir, "old.sqlite");
  const old = new Database(path);
  old.pragma("journal_mode = WAL");
  old.exec("CREATE TABLE filler (b BLOB)");
  const insert = old.prepare("INSERT INTO filler VALUES (?)");
  for (let i = 0; i < 80; i++) insert.run(randomBytes(256 * 1024));
  old.exec("DELETE FROM filler");
  expect(Number(old.pragma("auto_vacuum", { simple: true }))).toBe(0);
  old.close();
  expect(statSync(path).size).toBeGreaterThan(20 * MiB);

  const server = await startServer(["--store", `sqlite:${path}`]);
  servers.push(server);
  const listening = (await waitForLog(server, "listening")).entry;
  expect(listening.autoVacuum).toBe("incremental");
  expect(typeof listening.vacuumMs).toBe("number");
  expect(statSync(path).size).toBeLessThan(2 * MiB);
  await server.stop();
  const reopened = new Database(path, { readonly: true });
  expect(Number(reopened.pragma("auto_vacuum", { simple: true }))).toBe(2);
  reopened.close();
}, 60_000);
