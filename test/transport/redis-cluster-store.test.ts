import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileCluster } from "../helpers/backends.js";
import { spawnCluster, type SpawnedCluster } from "../helpers/redis-cluster.js";
import { makePki, type TestPki } from "../helpers/certs.js";
import { runCli } from "../helpers/cli.js";
import { spawnRedis, type SpawnedRedis } from "../helpers/redis-server.js";
import { runServeExpectingFailure, startServer } from "../helpers/server.js";
import { grpcClient } from "../helpers/clients.js";
import { freePort } from "../helpers/wait.js";
import { SessionLeaseService } from "../../gen/mecatl/driver/v1/session_lease_pb.js";
import { EventLogService } from "../../gen/mecatl/driver/v1/event_log_pb.js";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";

/** Runs `serve` expecting a one-line startup error (status 2) containing every `expected` part. */
async function refused(args: string[], ...expected: string[]): Promise<string> {
  const { code, stderr } = await runServeExpectingFailure(["--listen", "127.0.0.1:0", ...args]);
  const lines = stderr.trim().split("\n");
  expect(lines, stderr).toHaveLength(1);
  for (const e of expected) expect(lines[0]).toContain(e);
  expect(code).toBe(2);
  return lines[0]!;
}

describe("--store redis+cluster:// and rediss+cluster:// (issue 13)", () => {
  let cluster: SpawnedCluster;
  let single: SpawnedRedis;
  let dir: string;
  beforeAll(async () => {
    [cluster, single] = await Promise.all([fileCluster(), spawnRedis()]);
    dir = mkdtempSync(join(tmpdir(), "mecatl-cluster-url-"));
  });
  afterAll(async () => {
    await single?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test.each([
    ["credentials", "redis+cluster://user:pw@127.0.0.1:7000", "--redis-password-file"],
    ["a query parameter", "redis+cluster://127.0.0.1:7000?x=1", "query parameters"],
    ["a fragment", "redis+cluster://127.0.0.1:7000#x", "fragment"],
    ["a database path (a cluster has database 0 only)", "redis+cluster://127.0.0.1:7000/1", "database 0 only"],
    ["an empty seed", "redis+cluster://127.0.0.1:7000,,127.0.0.1:7001", "empty seed"],
    ["no seed at all", "redis+cluster://", "empty seed"],
    ["a seed that is not HOST:PORT", "redis+cluster://127.0.0.1:port", "is not HOST[:PORT]"],
    ["port 0", "redis+cluster://127.0.0.1:0", "port 0"],
    ["cleartext to a non-loopback seed", "redis+cluster://127.0.0.1:7000,10.1.2.3:7000", "--redis-allow-plaintext"],
  ])("a URL with %s is refused before connecting, naming --store and the fix", async (_label, url, expected) => {
    await refused(["--store", url, "session-lease"], expected);
  });

  test("no reachable seed is a one-line error naming the seeds", async () => {
    const port = await freePort();
    await refused(["--store", `redis+cluster://127.0.0.1:${port}`, "session-lease"], "cannot reach Redis Cluster", `127.0.0.1:${port}`);
  });

  test("a seed that is a single Redis, not a cluster node, points to redis://", async () => {
    await refused(["--store", `redis+cluster://127.0.0.1:${single.port}`, "session-lease"], "is not a cluster node", "redis://");
  });

  test("redis:// naming a cluster node points to redis+cluster://", async () => {
    await refused(["--store", `redis://${cluster.nodes[0]!.address}`, "session-lease"], "names a node of a Redis Cluster", "redis+cluster://");
  });

  test("rediss+cluster:// to cleartext nodes fails at once, naming the likely cause", async () => {
    await refused(["--store", `rediss+cluster://${cluster.nodes[0]!.address}`, "session-lease"], "answers in cleartext, not TLS");
  });

  test("--redis-tls-ca with a cleartext cluster URL is refused", async () => {
    const ca = join(dir, "ca.pem");
    writeFileSync(ca, "");
    await refused(["--store", cluster.url, "--redis-tls-ca", ca, "session-lease"], "--redis-tls-ca", "TLS stores");
  });

  test("a node without appendfsync always (a replica included) is refused in strict mode, naming the node; relaxed accepts it", async () => {
    const replica = cluster.nodes.find((n) => n.port === cluster.nodes.at(-1)!.port)!;
    const c = replica.client();
    await c.config("SET", "appendfsync", "everysec");
    try {
      await refused(["--store", cluster.url, "session-lease"], "appendfsync", replica.address, "--redis-durability=relaxed");
      const relaxed = await startServer(["session-lease", "--store", cluster.url, "--redis-durability", "relaxed"]);
      await relaxed.stop();
    } finally {
      await c.config("SET", "appendfsync", "always");
      c.disconnect();
    }
  });

  test("one seed is enough: leases and event logs are served from every primary", async () => {
    const server = await startServer(["session-lease", "event-log", "--store", `redis+cluster://${cluster.nodes[1]!.address}`]);
    try {
      const leases = grpcClient(SessionLeaseService, server.address);
      const events = grpcClient(EventLogService, server.address);
      // Forty ids: enough to reach every primary's slots.
      const ids = Array.from({ length: 40 }, (_, i) => `spread-${i}`);
      const tokens = await Promise.all(ids.map(async (id) => (await leases.acquire({ sessionId: id, owner: "o" })).lease?.token));
      expect(tokens).toEqual(ids.map(() => 1n));
      const payload = new TextEncoder().encode('{"n":1}');
      const appended = await Promise.all(ids.map((id) => events.append({ sessionId: id, event: { format: "eventlog-json/1", payload } })));
      expect(appended.map((a) => a.cursor !== "")).toEqual(ids.map(() => true));
      for (const primary of await cluster.primaries()) {
        const c = primary.client();
        expect(await c.dbsize(), `keys on ${primary.address}`).toBeGreaterThan(0);
        c.disconnect();
      }
      // The store's size per kind counts the keys of every primary.
      const stats = await runCli(["stats", "--store", cluster.url, "--json"]);
      expect(stats.code, stats.stderr).toBe(0);
      const byKind = Object.fromEntries((JSON.parse(stats.stdout) as Array<{ kind: string; records?: number }>).map((k) => [k.kind, k.records]));
      expect([byKind.leases, byKind.events]).toEqual([40, 40]);
    } finally {
      await server.stop();
    }
  });
});

describe("rediss+cluster:// with --redis-tls-ca and a password file", () => {
  let pki: TestPki;
  let cluster: SpawnedCluster;
  let dir: string;
  beforeAll(async () => {
    pki = makePki();
    dir = mkdtempSync(join(tmpdir(), "mecatl-cluster-tls-"));
    writeFileSync(join(dir, "password"), "cluster-secret\n");
    writeFileSync(join(dir, "wrong"), "not-it\n");
    cluster = await spawnCluster({ tls: { cert: pki.peerCert, key: pki.peerKey, ca: pki.caCert }, password: "cluster-secret" });
  });
  afterAll(async () => {
    await cluster?.stop();
    rmSync(dir, { recursive: true, force: true });
    rmSync(pki.dir, { recursive: true, force: true });
  });

  test("connects over TLS to every node with the CA and the password from its file", async () => {
    expect(cluster.url).toMatch(/^rediss\+cluster:\/\//);
    const server = await startServer(["session-lease", "--store", cluster.url, "--redis-tls-ca", pki.caCert, "--redis-password-file", join(dir, "password")]);
    try {
      const leases = grpcClient(SessionLeaseService, server.address);
      const ids = Array.from({ length: 20 }, (_, i) => `tls-${i}`);
      expect(await Promise.all(ids.map(async (id) => (await leases.acquire({ sessionId: id, owner: "o" })).lease?.token))).toEqual(ids.map(() => 1n));
    } finally {
      await server.stop();
    }
  });

  test("large snapshots are saved and loaded on every primary, their chunks read on a connection of its own with the same TLS and password", async () => {
    const server = await startServer(["session-store", "--store", cluster.url, "--redis-tls-ca", pki.caCert, "--redis-password-file", join(dir, "password")]);
    let stopped: number | null | undefined;
    try {
      const sessions = grpcClient(SessionStoreService, server.address);
      const ids = Array.from({ length: 6 }, (_, i) => `large-${i}`);
      const payloadOf = (i: number) => Buffer.alloc(2 * 1024 * 1024 + 17 * i, 0x41 + i);
      for (const [i, id] of ids.entries()) await sessions.save({ sessionId: id, snapshot: { format: "sessnap-json/1", payload: payloadOf(i) } });
      const loaded = await Promise.all(ids.map(async (id) => Buffer.from((await sessions.load({ sessionId: id })).snapshot!.payload)));
      expect(loaded.map((p, i) => p.equals(payloadOf(i)))).toEqual(ids.map(() => true));
    } finally {
      stopped = await server.stop();
    }
    expect(stopped).toBe(0);
  });

  test("a certificate it cannot verify, or a wrong password, is a one-line startup error", async () => {
    await refused(["--store", cluster.url, "--redis-password-file", join(dir, "password"), "session-lease"], "cannot reach Redis Cluster");
    await refused(["--store", cluster.url, "--redis-tls-ca", pki.caCert, "--redis-password-file", join(dir, "wrong"), "session-lease"], "refused the credentials", "--redis-password-file");
  });
});
