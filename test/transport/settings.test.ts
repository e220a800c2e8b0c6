import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { execFileSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { spawnRedis, type SpawnedRedis } from "../helpers/redis-server.js";
import { runServeExpectingFailure, startServer } from "../helpers/server.js";
import { grpcClient } from "../helpers/clients.js";
import { makePki, type TestPki } from "../helpers/certs.js";

/**
 * Issue 10, deliverable 4: every setting is validated at start. A setting the
 * server cannot honour gives one line naming the flag and the fix, exit
 * status 2, and creates nothing (no data directory, no database file, no
 * Redis key).
 */

const snap = { format: "sessnap-json/1", payload: new Uint8Array([7]) };

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "mecatl-settings-"));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A fresh, empty directory; the default store of {@link refused} lives below it. */
function emptyDir(): string {
  return mkdtempSync(join(dir, "case-"));
}

/**
 * Runs `serve` with `args` (after a default SQLite store under a fresh
 * directory), expects exit status 2 and one stderr line containing every
 * `expected` text, and that the directory is still empty.
 */
async function refused(args: string[], ...expected: string[]): Promise<string> {
  const home = emptyDir();
  const { code, stderr } = await runServeExpectingFailure(["--listen", "127.0.0.1:0", "--store", `sqlite:${join(home, "data", "store.sqlite")}`, ...args]);
  const lines = stderr.trim().split("\n");
  expect(lines, stderr).toHaveLength(1);
  for (const e of expected) expect(lines[0]).toContain(e);
  expect(code).toBe(2);
  expect(readdirSync(home)).toEqual([]);
  return lines[0]!;
}

describe("--store sqlite: a path the store cannot use is refused before anything is created", () => {
  test.each([
    ["under procfs", "/proc/mecatl-test/x.sqlite", "procfs"],
    ["under sysfs", "/sys/mecatl-test/x.sqlite", "sysfs"],
    ["a file as a parent directory", "/etc/hostname/x.sqlite", "/etc/hostname is not a directory"],
  ])("%s", async (_label, path, expected) => {
    await refused(["--store", `sqlite:${path}`], "--store", expected);
  });

  test("a directory", async () => {
    const target = emptyDir();
    await refused(["--store", `sqlite:${target}`], "--store", "is a directory");
    expect(readdirSync(target)).toEqual([]);
  });

  test("a directory that cannot be written", async () => {
    const target = emptyDir();
    // Root ignores permission bits, so as root (CI) the directory is a read-only mount.
    const root = process.getuid?.() === 0;
    if (root) execFileSync("mount", ["-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", target]);
    else chmodSync(target, 0o555);
    try {
      await refused(["--store", `sqlite:${join(target, "sub", "x.sqlite")}`], "--store", "is not writable");
      expect(readdirSync(target)).toEqual([]);
    } finally {
      if (root) execFileSync("umount", [target]);
      else chmodSync(target, 0o755);
    }
  });

  test("an existing file that is not an SQLite database is left untouched", async () => {
    const target = emptyDir();
    const file = join(target, "notes.txt");
    writeFileSync(file, "not a database\n");
    await refused(["--store", `sqlite:${file}`], "--store", "is not an SQLite database");
    expect(readdirSync(target)).toEqual(["notes.txt"]);
    expect(readFileSync(file, "utf8")).toBe("not a database\n");
  });

  test.each([
    ["a query parameter", "x.sqlite?mode=ro", "query parameters"],
    ["a fragment", "x.sqlite#main", "fragments"],
  ])("%s", async (_label, suffix, expected) => {
    const target = emptyDir();
    await refused(["--store", `sqlite:${join(target, suffix)}`], "--store", expected);
    expect(readdirSync(target)).toEqual([]);
  });

  test.each([
    ["a host", "sqlite://db.example/x.sqlite", "no host"],
    ["a misspelt :memory:", "sqlite::memroy:", "sqlite::memory:"],
  ])("%s", async (_label, store, expected) => {
    await refused(["--store", store], "--store", expected);
  });

  test("sqlite:///absolute/path and an empty existing file are accepted", async () => {
    const target = emptyDir();
    writeFileSync(join(target, "empty.sqlite"), "");
    for (const store of [`sqlite://${join(target, "abs.sqlite")}`, `sqlite:${join(target, "empty.sqlite")}`]) {
      const server = await startServer(["session-store", "--store", store]);
      try {
        await grpcClient(SessionStoreService, server.address).save({ sessionId: "s", snapshot: snap });
      } finally {
        await server.stop();
      }
    }
    expect(readdirSync(target).filter((f) => f.endsWith(".sqlite")).sort()).toEqual(["abs.sqlite", "empty.sqlite"]);
  });

  test("a Redis flag with an SQLite store is refused, not ignored", async () => {
    await refused(["--redis-key-prefix", "other:"], "--redis-key-prefix", "Redis stores only");
  });
});

describe("--store redis://: parts that are not understood, and a database that does not exist", () => {
  let redis: SpawnedRedis;
  beforeAll(async () => {
    redis = await spawnRedis();
  });
  afterAll(() => redis?.stop());

  /** True when no database of the spawned Redis holds a key. */
  async function redisEmpty(): Promise<boolean> {
    const client = redis.client();
    try {
      return !/^db\d+:/m.test(await client.info("keyspace"));
    } finally {
      client.disconnect();
    }
  }

  test("a database the server does not have (16 by default) is refused, naming the count", async () => {
    await refused(["--store", `${redis.url}/99`], "--store", "no database 99", "16");
    expect(await redisEmpty()).toBe(true);
  });

  test.each([
    ["a query parameter", "/1?db=2", "query parameters"],
    ["a fragment", "/1#x", "fragment"],
    ["a path that is not a decimal database number", "/0x1", "database number"],
    ["a database number in exponent form", "/1e1", "database number"],
    ["a nested path", "/1/2", "database number"],
    ["empty user info", "@", "credentials"],
  ])("%s", async (_label, part, expected) => {
    const url = part === "@" ? redis.url.replace("//", "//@") : `${redis.url}${part}`;
    await refused(["--store", url], "--store", expected);
    expect(await redisEmpty()).toBe(true);
  });

  test("rediss:// to a cleartext Redis fails at once, naming the likely cause", async () => {
    const line = await refused(["--store", `rediss://127.0.0.1:${redis.port}`], "--store", "answers in cleartext, not TLS");
    expect(line).not.toContain("ETIMEDOUT");
  });

  test("the database in the URL is the one used", async () => {
    const server = await startServer(["session-store", "--store", `${redis.url}/3`]);
    const client = redis.client();
    try {
      await grpcClient(SessionStoreService, server.address).save({ sessionId: "in-db-3", snapshot: snap });
      const keyspace = await client.info("keyspace");
      expect(keyspace).toMatch(/^db3:keys=/m);
      expect(keyspace).not.toMatch(/^db0:/m);
    } finally {
      client.disconnect();
      await server.stop();
    }
  });
});

describe("PEM files: each must hold what its flag needs", () => {
  let pki: TestPki;
  let other: TestPki;
  let garbage: string;
  let truncated: string;
  beforeAll(() => {
    pki = makePki();
    other = makePki();
    garbage = join(dir, "garbage.pem");
    writeFileSync(garbage, "this is not PEM\n");
    truncated = join(dir, "truncated.pem");
    writeFileSync(truncated, readFileSync(pki.serverCert, "utf8").slice(0, 200));
  });
  afterAll(() => {
    rmSync(pki.dir, { recursive: true, force: true });
    rmSync(other.dir, { recursive: true, force: true });
  });

  test.each([
    ["--tls-cert holds no PEM", () => ["--tls-cert", garbage, "--tls-key", pki.serverKey], ["--tls-cert", "holds no PEM certificate"]],
    ["--tls-cert holds a key", () => ["--tls-cert", pki.serverKey, "--tls-key", pki.serverKey], ["--tls-cert", "PRIVATE KEY"]],
    ["--tls-cert is truncated", () => ["--tls-cert", truncated, "--tls-key", pki.serverKey], ["--tls-cert", "without its END line"]],
    ["--tls-key holds a certificate", () => ["--tls-cert", pki.serverCert, "--tls-key", pki.serverCert], ["--tls-key", "holds no PEM private key"]],
    ["--tls-key does not match --tls-cert", () => ["--tls-cert", pki.serverCert, "--tls-key", other.serverKey], ["--tls-key", "does not match", "--tls-cert"]],
    ["--tls-client-ca holds a key", () => ["--tls-cert", pki.serverCert, "--tls-key", pki.serverKey, "--tls-client-ca", pki.caCert.replace("ca.pem", "ca.key")], ["--tls-client-ca", "holds no PEM certificate"]],
    ["--redis-tls-ca holds no PEM", () => ["--store", "rediss://127.0.0.1:6379", "--redis-tls-ca", garbage], ["--redis-tls-ca", "holds no PEM certificate"]],
    ["--redis-tls-ca with a cleartext store", () => ["--store", "redis://127.0.0.1:6379", "--redis-tls-ca", pki.caCert], ["--redis-tls-ca", "rediss://"]],
  ])("%s", async (_label, args, expected) => {
    await refused(args(), ...expected);
  });

  test("a valid chain, key and client CA start the server", async () => {
    const home = emptyDir();
    mkdirSync(join(home, "data"));
    const server = await startServer(["--store", `sqlite:${join(home, "data", "s.sqlite")}`, "--tls-cert", pki.serverCert, "--tls-key", pki.serverKey, "--tls-client-ca", pki.caCert]);
    await server.stop();
  });
});
