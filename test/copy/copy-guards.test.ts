/**
 * What `mecatl-drivers copy` refuses before it writes anything, and what it
 * leaves alone (issue 14, fresh-eyes review):
 *
 * - `--from` and `--to` naming one store in different text (`./`, a
 *   symbolic or hard link, `localhost` for `127.0.0.1`, two seed nodes of
 *   one Redis Cluster, nested key prefixes) are refused with exit 2, for
 *   `--replace` and `--verify-only`, and the source keeps every record;
 *   prefixes that are merely alike (`a:` and `a:b:`) are two stores;
 * - odd flags: `--verify-only` against a missing SQLite file, `--batch-size 0`,
 *   Redis flags of a side whose store is SQLite;
 * - `--replace` on a Redis target erases the store's keys only: keys of
 *   others under the same text (an empty `--to-redis-key-prefix`) stay;
 * - a source file that had no `-wal`/`-shm` files has none afterwards;
 * - `serve` refuses a store holding an unfinished copy, on every backend.
 */
import { afterAll, describe, expect, test } from "vitest";
import { existsSync, linkSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { spawnRedis, type SpawnedRedis } from "../helpers/redis-server.js";
import { startServer } from "../helpers/server.js";
import { runCli } from "../helpers/cli.js";
import { fillStore } from "../helpers/store-contents.js";
import { writeClients } from "../helpers/durable-writes.js";
import { fileCluster } from "../helpers/backends.js";
import { RedisKeys } from "../../services/storage/redis-keys.js";

const dir = mkdtempSync(join(tmpdir(), "mecatl-copy-guards-"));
let redis: SpawnedRedis | undefined;

afterAll(async () => {
  await redis?.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function spawnedRedis(): Promise<SpawnedRedis> {
  redis ??= await spawnRedis();
  return redis;
}

/** Fills `store` through a server (stopped again), and copies it to a reference SQLite file to check it against later. */
async function filled(store: string, tag: string, args: string[] = [], copyArgs: string[] = []): Promise<string> {
  const server = await startServer(["--store", store, ...args]);
  await fillStore(writeClients(server.address), tag);
  await server.stop();
  const reference = `sqlite:${join(dir, `${tag}-reference.sqlite`)}`;
  const r = await runCli(["copy", "--from", store, "--to", reference, ...copyArgs]);
  expect(r.code, r.stderr).toBe(0);
  return reference;
}

/** Expects `store` to hold exactly what `reference` holds (a --verify-only of both). */
async function expectIntact(store: string, reference: string, args: string[] = []): Promise<void> {
  const r = await runCli(["copy", "--from", reference, "--to", store, "--verify-only", ...args]);
  expect(r.code, `${r.stdout}${r.stderr}`).toBe(0);
}

describe("copy refuses --from and --to that are one store, whatever text names them", () => {
  test("SQLite: ./, a symbolic link and a hard link of the source file", async () => {
    const path = join(dir, "same.sqlite");
    const reference = await filled(`sqlite:${path}`, "same");
    symlinkSync(path, join(dir, "same-symlink.sqlite"));
    linkSync(path, join(dir, "same-hardlink.sqlite"));
    const cases: Array<[string, string]> = [
      [`${dir}/./same.sqlite`, "--replace"],
      [join(dir, "same-symlink.sqlite"), "--verify-only"],
      [join(dir, "same-hardlink.sqlite"), "--replace"],
    ];
    for (const [other, mode] of cases) {
      const r = await runCli(["copy", "--from", `sqlite:${path}`, "--to", `sqlite:${other}`, mode]);
      expect(r.code, `${other} ${mode}: ${r.stdout}${r.stderr}`).toBe(2);
      expect(r.stderr).toMatch(/--from and --to name the same store \(both are the SQLite file with device \d+ and inode \d+\)/);
    }
    await expectIntact(`sqlite:${path}`, reference);
  }, 60_000);

  test("Redis: 127.0.0.1 and localhost; nested key prefixes; alike prefixes are two stores", async () => {
    const r0 = await spawnedRedis();
    const store = `redis://127.0.0.1:${r0.port}/7`;
    const reference = await filled(store, "rsame");
    const replaced = await runCli(["copy", "--from", store, "--to", `redis://localhost:${r0.port}/7`, "--replace"]);
    expect(replaced.code, replaced.stderr).toBe(2);
    expect(replaced.stderr).toMatch(/same store \(both are keys "mecatl-drivers:v2:"\.\.\. of the Redis server run_id \w+, database 7\)/);
    const verify = await runCli(["copy", "--from", store, "--to", `redis://localhost:${r0.port}/7`, "--verify-only"]);
    expect(verify.code, verify.stdout).toBe(2);
    // A prefix whose keys lie inside the source's key space: the source's scans and erase reach them.
    const nested = await runCli(["copy", "--from", store, "--to", `redis://localhost:${r0.port}/7`, "--to-redis-key-prefix", "mecatl-drivers:v2:x:", "--replace"]);
    expect(nested.code, nested.stderr).toBe(2);
    expect(nested.stderr).toContain("overlap");
    // Another database of the same server is another store.
    const otherDb = await runCli(["copy", "--from", store, "--to", `redis://localhost:${r0.port}/8`]);
    expect(otherDb.code, otherDb.stderr).toBe(0);
    await expectIntact(store, reference);

    // a: and a:b: are apart (keys a:v2:... and a:b:v2:...): a --replace of one leaves the other whole.
    const inner = `redis://127.0.0.1:${r0.port}/9`;
    const innerReference = await filled(inner, "rab", ["--redis-key-prefix", "a:b:"], ["--from-redis-key-prefix", "a:b:"]);
    const apart = await runCli(["copy", "--from", inner, "--from-redis-key-prefix", "a:b:", "--to", inner, "--to-redis-key-prefix", "a:", "--replace"]);
    expect(apart.code, apart.stderr).toBe(0);
    const again = await runCli(["copy", "--from", inner, "--from-redis-key-prefix", "a:b:", "--to", inner, "--to-redis-key-prefix", "a:", "--replace"]);
    expect(again.code, again.stderr).toBe(0);
    await expectIntact(inner, innerReference, ["--to-redis-key-prefix", "a:b:"]);
  }, 90_000);

  test("Redis Cluster: two different seed nodes of one cluster", async () => {
    const cluster = await fileCluster();
    await cluster.flush();
    const [a, b] = [cluster.nodes[0]!, cluster.nodes[1]!];
    const store = `redis+cluster://${a.address}`;
    const reference = await filled(store, "csame");
    for (const mode of ["--replace", "--verify-only"]) {
      const r = await runCli(["copy", "--from", store, "--to", `redis+cluster://localhost:${b.port}`, mode]);
      expect(r.code, `${mode}: ${r.stdout}${r.stderr}`).toBe(2);
      expect(r.stderr).toMatch(/same store \(both are keys "mecatl-drivers:v2:"\.\.\. of the Redis Cluster node \w+\)/);
    }
    await expectIntact(store, reference);
  }, 90_000);
});

describe("copy refuses odd flags, and leaves alone what is not its own", () => {
  test("--verify-only against a missing SQLite file, --batch-size 0, Redis flags of an SQLite side", async () => {
    const from = `sqlite:${join(dir, "flags.sqlite")}`;
    await filled(from, "flags");
    const missing = join(dir, "nonexistent.sqlite");
    const r = await runCli(["copy", "--from", from, "--to", `sqlite:${missing}`, "--verify-only"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`--to sqlite:${missing}: no such file`);
    expect(existsSync(missing)).toBe(false);

    for (const size of ["0", "0.1"]) {
      const zero = await runCli(["copy", "--from", from, "--to", `sqlite:${join(dir, "zero.sqlite")}`, "--batch-size", size]);
      expect(zero.code, size).toBe(2);
      expect(zero.stderr).toMatch(/--batch-size .*at least 1 byte/);
    }
    expect(existsSync(join(dir, "zero.sqlite"))).toBe(false);

    const secret = join(dir, "password");
    const sides: Array<[string[], string]> = [
      [["--from-redis-password-file", secret], "--from-redis-password-file applies to Redis stores only, and --from is"],
      [["--to-redis-key-prefix", "x:"], "--to-redis-key-prefix applies to Redis stores only, and --to is"],
      [["--to-redis-durability", "relaxed"], "--to-redis-durability applies to Redis stores only"],
    ];
    for (const [flags, message] of sides) {
      const refused = await runCli(["copy", "--from", from, "--to", `sqlite:${join(dir, "flags-to.sqlite")}`, ...flags]);
      expect(refused.code, flags.join(" ")).toBe(2);
      expect(refused.stderr).toContain(message);
    }
  }, 60_000);

  test("--replace into a Redis store with an empty key prefix erases the store's keys, not others starting with v2:", async () => {
    const r0 = await spawnedRedis();
    const to = `redis://127.0.0.1:${r0.port}/11`;
    const full = `sqlite:${join(dir, "prefix-full.sqlite")}`;
    await filled(full, "pf");
    const first = await runCli(["copy", "--from", full, "--to", to, "--to-redis-key-prefix", ""]);
    expect(first.code, first.stderr).toBe(0);
    const client = r0.client();
    await client.select(11);
    const foreign = ["v2:foreign", "v2:session:{zz}:other", "v2:sessions:{nope}", "v2:store:{config}x"];
    for (const k of foreign) await client.set(k, "not the store's");
    // An empty store replaces the full one: everything of the store goes, the foreign keys stay.
    const empty = `sqlite:${join(dir, "prefix-empty.sqlite")}`;
    const server = await startServer(["--store", empty]);
    await server.stop();
    const replaced = await runCli(["copy", "--from", empty, "--to", to, "--to-redis-key-prefix", "", "--replace", "--json"]);
    expect(replaced.code, replaced.stderr).toBe(0);
    const kinds = (JSON.parse(replaced.stdout) as { kinds: Array<{ target: { records: number } }> }).kinds;
    expect(kinds.map((k) => k.target.records)).toEqual([0, 0, 0, 0, 0, 0]);
    const left = (await client.keys("*")).sort();
    const keys = new RedisKeys("");
    expect(left.filter((k) => !keys.owns(k))).toEqual([...foreign].sort());
    for (const k of foreign) expect(await client.get(k)).toBe("not the store's");
    // What is left of the store is its configuration (store:{config}), no record.
    expect(left.filter((k) => keys.owns(k))).toEqual(["v2:store:{config}"]);
    client.disconnect();
  }, 60_000);

  test("a source file without -wal/-shm files has none after copy or --verify-only", async () => {
    const path = join(dir, "backup-like.sqlite");
    await filled(`sqlite:${path}`, "wal");
    expect(existsSync(`${path}-wal`) || existsSync(`${path}-shm`)).toBe(false);
    const to = join(dir, "wal-to.sqlite");
    const r = await runCli(["copy", "--from", `sqlite:${path}`, "--to", `sqlite:${to}`]);
    expect(r.code, r.stderr).toBe(0);
    expect([existsSync(`${path}-wal`), existsSync(`${path}-shm`)]).toEqual([false, false]);
    const v = await runCli(["copy", "--from", `sqlite:${path}`, "--to", `sqlite:${to}`, "--verify-only"]);
    expect(v.code, v.stderr).toBe(0);
    expect([existsSync(`${path}-wal`), existsSync(`${path}-shm`), existsSync(`${to}-wal`), existsSync(`${to}-shm`)]).toEqual([false, false, false, false]);
  }, 60_000);
});

describe("serve refuses a store holding an unfinished copy", () => {
  const progress = JSON.stringify({ version: 1, source: "sqlite:/somewhere/source.sqlite", phase: "copying", kind: "sessions", done: {} });

  async function expectRefused(store: string, args: string[] = [], named = store): Promise<void> {
    const r = await runCli(["serve", "--store", store, "--listen", "127.0.0.1:0", ...args], { timeoutMs: 20_000 });
    expect(r.code, r.stderr).toBe(2);
    expect((JSON.parse(r.stderr) as { msg: string }).msg).toContain(`${named} holds an unfinished copy from sqlite:/somewhere/source.sqlite`);
    expect(r.stderr).toContain("--resume");
    expect(r.stderr).toContain("--replace");
    expect(r.stderr.trim().split("\n")).toHaveLength(1);
  }

  test("SQLite file (table copy_progress)", async () => {
    const path = join(dir, "half.sqlite");
    const server = await startServer(["--store", `sqlite:${path}`]);
    await server.stop();
    const db = new Database(path);
    db.exec("CREATE TABLE copy_progress (id INTEGER NOT NULL PRIMARY KEY CHECK (id = 1), state TEXT NOT NULL) STRICT");
    db.prepare("INSERT INTO copy_progress (id, state) VALUES (1, ?)").run(progress);
    db.close();
    await expectRefused(`sqlite:${path}`);
  }, 30_000);

  test("Redis (key <prefix>v2:copy-progress)", async () => {
    const r0 = await spawnedRedis();
    const client = r0.client();
    await client.select(12);
    await client.set(new RedisKeys("mecatl-drivers:").copyProgress(), progress);
    // Another store on the same Redis, under its own key prefix, is the one refused: the line names it.
    await client.set(new RedisKeys("cp1:").copyProgress(), progress);
    client.disconnect();
    const url = `redis://127.0.0.1:${r0.port}/12`;
    await expectRefused(url, [], `${url} (key prefix "mecatl-drivers:")`);
    await expectRefused(url, ["--redis-key-prefix", "cp1:"], `${url} (key prefix "cp1:")`);
  }, 30_000);

  test("Redis Cluster (key <prefix>v2:copy-progress)", async () => {
    const cluster = await fileCluster();
    await cluster.flush();
    const client = cluster.client();
    await client.set(new RedisKeys("mecatl-drivers:").copyProgress(), progress);
    client.disconnect();
    await expectRefused(cluster.url, [], `${cluster.url} (key prefix "mecatl-drivers:")`);
  }, 60_000);
});
