/**
 * `mecatl-drivers backup` (issue 14): an online backup of an SQLite store
 * taken while a server goes on writing is a consistent snapshot (a session
 * whose snapshot records "after event n" has at least n events in the
 * backup, and every write acknowledged before the backup started is in it),
 * passes the integrity check, and restores with `copy --from sqlite:BACKUP`
 * to SQLite and to Redis, verified, where a server serves it. Also the
 * refusals: an existing file, a Redis store.
 */
import { afterAll, expect, test } from "vitest";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { runCli, spawnCli, finished } from "../helpers/cli.js";
import { spawnRedis, type SpawnedRedis } from "../helpers/redis-server.js";
import { writeClients, type WriteClients } from "../helpers/durable-writes.js";
import { sessnap } from "../helpers/sessnap.js";
import { ev } from "../helpers/event-log.js";
import { waitFor } from "../helpers/wait.js";

const dir = mkdtempSync(join(tmpdir(), "mecatl-backup-"));
let redis: SpawnedRedis | undefined;
const servers: ServerProcess[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => s.stop()));
  await redis?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** The snapshot of "live" names the last event appended before it was saved. */
async function writeStep(c: WriteClients, n: number): Promise<void> {
  await c.events.append({ sessionId: "live", event: ev({ n }) });
  const payload = sessnap({ id: "live", title: `after event ${n}`, messages: [{ role: "user", text: "p".repeat(8 * 1024) }] });
  await c.sessions.save({ sessionId: "live", snapshot: { format: "sessnap-json/1", payload } });
}

async function liveState(c: WriteClients): Promise<{ saved: number; events: number }> {
  const payload = (await c.sessions.load({ sessionId: "live" })).snapshot!.payload;
  const saved = Number(/after event (\d+)/.exec(Buffer.from(payload).toString("utf8"))![1]);
  let events = 0;
  for await (const _ of c.events.readAfter({ sessionId: "live" })) events++;
  return { saved, events };
}

test("a backup taken during writes is consistent, verifies, and restores to SQLite and Redis", async () => {
  const store = `sqlite:${join(dir, "live.sqlite")}`;
  const server = await startServer(["--store", store]);
  servers.push(server);
  const c = writeClients(server.address);
  // About 40 MiB of other sessions, so the backup takes many steps while the writer goes on.
  const filler = "f".repeat(256 * 1024);
  for (let i = 0; i < 160; i += 16) {
    await Promise.all(Array.from({ length: 16 }, (_, j) => c.sessions.save({ sessionId: `f${i + j}`, snapshot: { format: "sessnap-json/1", payload: sessnap({ id: `f${i + j}`, messages: [{ role: "user", text: filler }] }) } })));
  }
  let n = 0;
  let writing = true;
  const writer = (async () => {
    while (writing) await writeStep(c, ++n);
  })();
  await waitFor(() => n >= 20, 30_000, "20 write steps before the backup");
  const ackedBefore = n - 1;
  const file = join(dir, "backup.sqlite");
  const backup = await finished(spawnCli(["backup", "--store", store, "--to", file, "--json"]), 60_000);
  const ackedDuring = n - 1 - ackedBefore;
  writing = false;
  await writer;
  expect(backup.code, backup.stderr).toBe(0);
  const result = JSON.parse(backup.stdout) as { integrity: string; contents: Record<string, number> };
  expect(result.integrity).toBe("ok");
  expect(result.contents.sessions).toBe(161);
  expect(ackedDuring).toBeGreaterThan(0);
  expect(existsSync(`${file}.partial`)).toBe(false);

  const refused = await runCli(["backup", "--store", store, "--to", file]);
  expect(refused.code).toBe(2);
  expect(refused.stderr).toContain("exists");

  // Restore by copy (which verifies), then serve the restored stores.
  redis = await spawnRedis();
  for (const to of [`sqlite:${join(dir, "restored.sqlite")}`, redis.url]) {
    const restored = await runCli(["copy", "--from", `sqlite:${file}`, "--to", to], { timeoutMs: 60_000 });
    expect(restored.code, restored.stderr).toBe(0);
    expect(restored.stdout).toContain("copied and verified");
    const s = await startServer(["--store", to]);
    servers.push(s);
    const state = await liveState(writeClients(s.address));
    expect(state.saved).toBeGreaterThanOrEqual(ackedBefore);
    // One snapshot: the save that followed event n is there only with event n (n or n + 1 events: the next append may have made it in).
    expect([state.saved, state.saved + 1]).toContain(state.events);
  }

  const fromRedis = await runCli(["backup", "--store", redis.url, "--to", join(dir, "redis.backup")]);
  expect(fromRedis.code).toBe(2);
  expect(fromRedis.stderr).toContain("RDB");
}, 120_000);
