/**
 * `mecatl-drivers copy` between every pair of backends (issue 14): a store
 * holding a little of everything is copied; a server on the target then
 * shows exactly what a server on the source showed (snapshots and save
 * times, metadata rows, lineage with tombstones, logs with their cursors,
 * schedules and fires byte for byte), a cursor the source issued reads on
 * from where it stood, a held lease renews with its token and a takeover
 * gets a token above the source's high-water mark. Also: a non-empty target
 * is refused and left alone, and --verify-only names a difference planted in
 * each kind.
 */
import { afterAll, describe, expect, test } from "vitest";
import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { spawnRedis, type SpawnedRedis } from "../helpers/redis-server.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { runCli } from "../helpers/cli.js";
import { fillStore, readContents, type Filled } from "../helpers/store-contents.js";
import { writeClients } from "../helpers/durable-writes.js";
import { fileCluster } from "../helpers/backends.js";

const dir = mkdtempSync(join(tmpdir(), "mecatl-copy-"));
let redis: SpawnedRedis | undefined;
const servers: ServerProcess[] = [];

afterAll(async () => {
  await Promise.all(servers.map((s) => s.stop()));
  await redis?.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function redisUrl(db: number): Promise<string> {
  redis ??= await spawnRedis();
  return `${redis.url}/${db}`;
}

async function serve(store: string): Promise<ServerProcess> {
  const s = await startServer(["--store", store]);
  servers.push(s);
  return s;
}

/** A store filled through a server, which is stopped again (copy needs the writers stopped). */
async function filledStore(store: string, prefix: string): Promise<{ filled: Filled; contents: Record<string, unknown> }> {
  const server = await serve(store);
  const clients = writeClients(server.address);
  const filled = await fillStore(clients, prefix);
  const contents = await readContents(clients, filled);
  await server.stop();
  return { filled, contents };
}

/** The file's Redis Cluster, emptied: one store per cluster (it has database 0 only). */
async function clusterUrl(): Promise<string> {
  const cluster = await fileCluster();
  await cluster.flush();
  return cluster.url;
}

const PAIRS: Array<[string, (n: string) => Promise<string>, (n: string) => Promise<string>]> = [
  ["sqlite -> redis", async (n) => `sqlite:${join(dir, `${n}.sqlite`)}`, () => redisUrl(1)],
  ["sqlite -> redis-cluster", async (n) => `sqlite:${join(dir, `${n}.sqlite`)}`, clusterUrl],
  ["redis-cluster -> redis", clusterUrl, () => redisUrl(5)],
  ["redis -> sqlite", () => redisUrl(2), async (n) => `sqlite:${join(dir, `${n}-to.sqlite`)}`],
  ["sqlite -> sqlite", async (n) => `sqlite:${join(dir, `${n}.sqlite`)}`, async (n) => `sqlite:${join(dir, `${n}-to.sqlite`)}`],
  ["redis -> redis", () => redisUrl(3), () => redisUrl(4)],
];

describe.each(PAIRS)("copy %s", (name, sourceUrl, targetUrl) => {
  test("the target serves exactly what the source held; old cursors read on, lease tokens go on rising", async () => {
    const tag = name.replace(/\W+/g, "-");
    const from = await sourceUrl(tag);
    const to = await targetUrl(tag);
    const { filled, contents } = await filledStore(from, tag);

    const r = await runCli(["copy", "--from", from, "--to", to, "--json"], { timeoutMs: 60_000 });
    expect(r.code, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout) as { ok: boolean; kinds: Array<{ kind: string; same: boolean; source: { records: number }; target: { records: number } }> };
    expect(report.ok).toBe(true);
    expect(Object.fromEntries(report.kinds.map((k) => [k.kind, k.target.records]))).toEqual({ sessions: 6, lineage: 6, events: 19, leases: 2, schedules: 2, fires: 2 });

    const server = await serve(to);
    const c = writeClients(server.address);
    expect(await readContents(c, filled)).toEqual(contents);

    // A cursor the source issued (after record 4, just before the gap) reads on from record 5 on the target.
    const rootLog = filled.cursors.get(`${tag}-root`)!;
    const after: string[] = [];
    for await (const rec of c.events.readAfter({ sessionId: `${tag}-root`, cursor: rootLog[3] })) after.push(rec.cursor);
    expect(after).toEqual(rootLog.slice(4));
    // The held lease renews with its token; a takeover of the released one gets a token above the source's.
    const renewed = (await c.leases.renew({ lease: filled.held })).lease!;
    expect(renewed.token).toBe(filled.held.token);
    const taken = (await c.leases.acquire({ sessionId: filled.releasedId, owner: "after-copy" })).lease!;
    expect(taken.token).toBe(filled.releasedToken + 1n);
    await server.stop();
  });
});

describe("copy refusals and verification", () => {
  test("a non-empty target is refused (exit 2, saying what it holds) and left as it was", async () => {
    const from = `sqlite:${join(dir, "refuse-from.sqlite")}`;
    const to = `sqlite:${join(dir, "refuse-to.sqlite")}`;
    await filledStore(from, "a");
    const server = await serve(to);
    const c = writeClients(server.address);
    await c.leases.acquire({ sessionId: "only-a-lease", owner: "o" });
    await server.stop();

    const r = await runCli(["copy", "--from", from, "--to", to]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("is not empty (it holds 1 lease records)");
    expect(r.stderr).toContain("--replace");
    const verify = await runCli(["copy", "--from", from, "--to", to, "--verify-only", "--json"]);
    const kinds = (JSON.parse(verify.stdout) as { kinds: Array<{ kind: string; target: { records: number } }> }).kinds;
    expect(kinds.map((k) => k.target.records)).toEqual([0, 0, 0, 1, 0, 0]);

    const replaced = await runCli(["copy", "--from", from, "--to", to, "--replace"]);
    expect(replaced.code, replaced.stderr).toBe(0);
    expect(replaced.stdout).toContain("copied and verified");
  });

  test("--replace into a Redis Cluster erases what every primary held first, then copies and verifies", async () => {
    const from = `sqlite:${join(dir, "replace-cluster.sqlite")}`;
    await filledStore(from, "rc");
    const to = await clusterUrl();
    const first = await runCli(["copy", "--from", from, "--to", to]);
    expect(first.code, first.stderr).toBe(0);
    expect((await runCli(["copy", "--from", from, "--to", to])).code).toBe(2);
    const replaced = await runCli(["copy", "--from", from, "--to", to, "--replace"]);
    expect(replaced.code, replaced.stderr).toBe(0);
    expect(replaced.stdout).toContain("copied and verified");
  });

  test("--verify-only names a difference planted in each kind and exits 1", async () => {
    const from = `sqlite:${join(dir, "plant-from.sqlite")}`;
    const toPath = join(dir, "plant-to.sqlite");
    await filledStore(from, "p");
    const copied = await runCli(["copy", "--from", from, "--to", `sqlite:${toPath}`]);
    expect(copied.code, copied.stderr).toBe(0);
    // The copy closed the target cleanly (WAL checkpointed): a file copy restores it between plants.
    const pristine = join(dir, "plant-pristine.sqlite");
    copyFileSync(toPath, pristine);

    const changed = "different content";
    const plants: Array<[string, string, string, string]> = [
      ["sessions", `UPDATE sessions SET modified_us = modified_us + 1 WHERE session_id = 'p-plain'`, "p-plain", changed],
      ["lineage", `UPDATE session_lineage SET deleted_us = deleted_us + 1 WHERE session_id = 'p-gone'`, "p-gone", changed],
      ["events", `UPDATE event_records SET payload = CAST('{"seq":2}' AS BLOB) WHERE position = 2 AND log_id = (SELECT log_id FROM event_logs WHERE session_id = 'p-child')`, "p-child", changed],
      ["leases", `UPDATE session_leases SET high_water = high_water - 1 WHERE session_id = 'p-free'`, "p-free", changed],
      ["leases", `DELETE FROM session_leases WHERE session_id = 'p-free'`, "p-free", "missing in the target"],
      ["schedules", `UPDATE schedules SET spec = replace(spec, 'nightly', 'nightlY') WHERE name = 'p-nightly'`, "p-nightly", changed],
      ["fires", `UPDATE schedule_fires SET payload = replace(payload, '"Err":""', '"Err":"x"') WHERE fire_id = 'p-fire-2'`, "p-fire-2", changed],
      ["fires", `INSERT INTO schedule_fires SELECT 'p-fire-3', schedule_name, payload FROM schedule_fires WHERE fire_id = 'p-fire-2'`, "p-fire-3", "only in the target"],
    ];
    for (const [kind, sql, id, what] of plants) {
      copyFileSync(pristine, toPath);
      const db = new Database(toPath);
      const before = db.prepare("SELECT total_changes() AS n").get() as { n: number };
      db.exec(sql);
      expect((db.prepare("SELECT total_changes() AS n").get() as { n: number }).n, kind).toBeGreaterThan(before.n);
      db.close();
      const r = await runCli(["copy", "--from", from, "--to", `sqlite:${toPath}`, "--verify-only"]);
      expect(r.code, `${kind}: ${r.stdout}`).toBe(1);
      expect(r.stdout).toMatch(new RegExp(`^${kind} +.*1 differ`, "m"));
      expect(r.stdout).toMatch(new RegExp(`^${kind} "${id}[ "].*: ${what}$`, "m"));
    }
  }, 180_000); // nine CLI runs (each a few seconds on a loaded machine)
});
