import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll } from "vitest";
import type { Cluster, Redis } from "ioredis";
import { RedisKeys } from "../../services/storage/redis-keys.js";
import { spawnRedis, type SpawnedRedis } from "./redis-server.js";
import { spawnCluster, type SpawnedCluster } from "./redis-cluster.js";

/**
 * One backend a conformance suite runs against. `setup` creates a fresh store
 * and returns the `--store` URL (plus any extra serve flags); `teardown`
 * removes it. Suites run `describe.each(BACKENDS)`.
 */
export interface TestBackend {
  name: "sqlite-file" | "sqlite-memory" | "redis" | "redis-cluster";
  /** True when two server processes can share the store. */
  shared: boolean;
  setup(): Promise<{ store: string; args: string[]; redis?: SpawnedRedis; cluster?: SpawnedCluster }>;
  teardown(): Promise<void>;
}

/**
 * An SQLite file in a new directory at every setup. Teardown removes every
 * directory made since the last one (a test file may set up once per test;
 * before, only the last was removed).
 */
function sqliteFile(): TestBackend {
  const dirs: string[] = [];
  return {
    name: "sqlite-file",
    shared: true,
    async setup() {
      const dir = mkdtempSync(join(tmpdir(), "mecatl-sqlite-"));
      dirs.push(dir);
      return { store: `sqlite:${join(dir, "store.sqlite")}`, args: [] };
    },
    async teardown() {
      for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
    },
  };
}

function sqliteMemory(): TestBackend {
  return {
    name: "sqlite-memory",
    shared: false,
    async setup() {
      return { store: "sqlite::memory:", args: [] };
    },
    async teardown() {},
  };
}

/**
 * A new redis-server at every setup. Teardown stops every one started since
 * the last (before, only the last was stopped, and a file that set up once
 * per test left the others running; found by a fresh-eyes run).
 */
function redis(): TestBackend {
  const servers: SpawnedRedis[] = [];
  return {
    name: "redis",
    shared: true,
    async setup() {
      const server = await spawnRedis();
      servers.push(server);
      return { store: server.url, args: [], redis: server };
    },
    async teardown() {
      await Promise.all(servers.splice(0).map((server) => server.stop()));
    },
  };
}

let sharedCluster: Promise<SpawnedCluster> | undefined;

// One Redis Cluster per test file (each file runs in a process of its own),
// started by the first cluster backend set up and stopped after the file's
// last test: starting six nodes per describe block would cost seconds each.
afterAll(async () => {
  const cluster = sharedCluster;
  sharedCluster = undefined;
  await (await cluster?.catch(() => undefined))?.stop();
});

/**
 * `cluster-node-timeout` of the conformance suite's cluster, in milliseconds.
 * A primary that fsyncs a 22.5 MiB record (`appendfsync always`) on a loaded
 * CI machine can stop answering the cluster bus for seconds; with the fault
 * tests' 2 s timeout its replica is then promoted before it received that
 * acknowledged write, and the write is gone (Redis replicates asynchronously;
 * only `--redis-wait-replicas` guards against that, which the conformance
 * suite does not use). The conformance suite tests the rules, not failover.
 */
const CONFORMANCE_NODE_TIMEOUT_MS = 30_000;

/**
 * The test file's Redis Cluster (3 primaries with a replica each, see
 * test/helpers/redis-cluster.ts), started on first use and healthy: a test
 * that killed a node waits for the cluster to recover before handing it on.
 * `nodeTimeoutMs` (default 2000, for fault tests that fail over) is taken
 * from the file's first call, which starts the cluster.
 */
export async function fileCluster(options: { nodeTimeoutMs?: number } = {}): Promise<SpawnedCluster> {
  sharedCluster ??= spawnCluster(options);
  const cluster = await sharedCluster;
  await cluster.waitHealthy();
  return cluster;
}

/**
 * A Redis Cluster store: the file's shared cluster ({@link fileCluster}),
 * flushed at every setup so each describe block starts from an empty store.
 */
function redisCluster(): TestBackend {
  return {
    name: "redis-cluster",
    shared: true,
    async setup() {
      const cluster = await fileCluster({ nodeTimeoutMs: CONFORMANCE_NODE_TIMEOUT_MS });
      await cluster.flush();
      return { store: cluster.url, args: [], cluster };
    },
    async teardown() {},
  };
}

/** What {@link TestBackend.setup} returns. */
export type BackendSetup = Awaited<ReturnType<TestBackend["setup"]>>;

/**
 * A raw client of a set-up Redis backend, for white-box reads and seeds
 * (a Cluster client on a cluster); undefined for SQLite. Caller quits it.
 */
export function rawRedis(setup: BackendSetup): Redis | Cluster | undefined {
  return setup.redis?.client() ?? setup.cluster?.client();
}

/** The keys of a store served with the default `--redis-key-prefix` (and partition count). */
export const DEFAULT_KEYS = new RedisKeys("mecatl-drivers:");

/**
 * `n` session ids (`hint-0`, `hint-1`, ... those that fit) whose records
 * fall in partition `partition` of {@link DEFAULT_KEYS}' layout, so in that
 * partition's hash slot on a Redis Cluster.
 */
export function idsInPartition(partition: number, hint: string, n: number): string[] {
  const out: string[] = [];
  for (let i = 0; out.length < n; i++) if (DEFAULT_KEYS.layout.partitionOf(`${hint}-${i}`) === partition) out.push(`${hint}-${i}`);
  return out;
}

/** The Redis Cluster backend alone (see {@link fileCluster}). */
export function clusterBackends(): TestBackend[] {
  return [redisCluster()];
}

/** Fresh backend factories: an SQLite file, `sqlite::memory:`, and a spawned redis-server. */
export function allBackends(): TestBackend[] {
  return [sqliteFile(), sqliteMemory(), redis()];
}

/** Backends two processes can share (for cross-process tests). */
export function sharedBackends(): TestBackend[] {
  return allBackends().filter((b) => b.shared);
}

/**
 * The backends the conformance suite (test/conformance/) runs against:
 * {@link allBackends} and a Redis Cluster. Tests elsewhere keep to
 * {@link allBackends}, so the cluster's cost is paid once per conformance file.
 */
export function conformanceBackends(): TestBackend[] {
  return [...allBackends(), ...clusterBackends()];
}

/** {@link conformanceBackends} two processes can share. */
export function sharedConformanceBackends(): TestBackend[] {
  return conformanceBackends().filter((b) => b.shared);
}
