import type { RedisClient } from "./redis-client.js";
import { SqliteDatabase } from "./sqlite-database.js";
import { durabilityWatch, StartupError, type RedisConnectOptions } from "./redis-connection.js";
import { connectRedisClient, isCluster, isRedisStoreUrl } from "./redis-client.js";
import { clusterDurability } from "./redis-cluster.js";
import { setReplicaWait } from "./redis-replicas.js";
import { closeRedisClient } from "./redis-bulk-reader.js";
import { reconnectCause } from "./redis-reconnect-cause.js";
import type { DurabilityCheckOutcome } from "./redis-durability-watch.js";
import type { EventEmitter } from "node:events";
import type { RedisKeys } from "./redis-keys.js";
import { openRedisStore } from "./redis-store.js";
import type { UpgradeLog } from "./redis-upgrade.js";
import { checkSqlitePath, parseSqliteStoreUrl } from "./sqlite-path.js";
import type { StoreFailure } from "./store-failure.js";
import { trackWriteRefusals, writeRefusals } from "./redis-write-refusal.js";

/** The embedded backend: one SQLite file (or a private in-memory database). */
export interface SqliteBackend {
  readonly kind: "sqlite";
  readonly db: SqliteDatabase;
  /** False only for `sqlite::memory:`. */
  readonly durable: boolean;
  /** `sqlite:PATH` as given, for logs and health. */
  readonly description: string;
  /** Milliseconds one store operation may take before it fails with a {@link StoreFailure} (`--store-timeout`). */
  readonly storeTimeoutMs: number;
}

/** The shared backend: one Redis server, or a Redis Cluster (issue 13), reached through ioredis. */
export interface RedisBackend {
  readonly kind: "redis";
  /** A single-Redis connection, or a cluster client (see {@link isCluster}). */
  readonly redis: RedisClient;
  /** With `--redis-wait-replicas`: the client writes go through (redis-replicas.ts). */
  readonly writer?: RedisClient;
  readonly keys: RedisKeys;
  /** True when `appendonly yes` + `appendfsync always` were verified at start. */
  readonly durable: boolean;
  readonly description: string;
  /** Milliseconds one store operation may take before it fails with a {@link StoreFailure} (`--store-timeout`). */
  readonly storeTimeoutMs: number;
}

/** A store every service of one process shares. */
export type Backend = SqliteBackend | RedisBackend;

/** Options for {@link openBackend}, from `serve` flags. */
export interface BackendOptions {
  /** `sqlite:PATH`, `sqlite::memory:`, `redis://HOST:PORT[/DB]`, `rediss://...`, `redis+cluster://HOST:PORT[,HOST:PORT...]` or `rediss+cluster://...`. */
  store: string;
  /** Redis settings besides the URL. */
  redis?: Omit<RedisConnectOptions, "url"> & {
    /**
     * `--redis-wait-replicas`: replicas that must acknowledge every write
     * (`WAIT`) before it is answered OK; 0 (the default) answers once the
     * primary has it.
     */
    waitReplicas?: number;
  };
  /** Redis key prefix (`--redis-key-prefix`, default `mecatl-drivers:`). */
  redisKeyPrefix?: string;
  /**
   * Milliseconds one store operation may take, retries included, before the
   * call fails with UNAVAILABLE (`--store-timeout`, default
   * {@link DEFAULT_STORE_TIMEOUT_MS}; issue 9).
   */
  storeTimeoutMs?: number;
  /** Where the progress of a Redis key layout upgrade is reported (the server's log). */
  log?: UpgradeLog;
}

/** The `--store` forms, as a remedy for a URL that is none of them. */
export const KNOWN_STORES = "use sqlite:PATH, sqlite::memory:, redis://HOST:PORT[/DB], rediss://HOST:PORT[/DB], redis+cluster://HOST:PORT[,HOST:PORT...] or rediss+cluster://HOST:PORT[,HOST:PORT...]";

/** Default of `--redis-key-prefix`. */
export const DEFAULT_REDIS_KEY_PREFIX = "mecatl-drivers:";

/** Default of `--store-timeout`: 5 s. */
export const DEFAULT_STORE_TIMEOUT_MS = 5000;

/**
 * Opens the store named by `--store`.
 *
 * @throws StartupError with a one-line remedy when the URL is unknown or has a
 *   part that is not understood, the SQLite path cannot hold a database (checked
 *   before anything is created) or the file cannot be opened, or Redis is
 *   unreachable, not durable, or lacks the database the URL names (issue 10),
 *   or its key layout cannot be opened or upgraded (redis-store.ts).
 */
export async function openBackend(options: BackendOptions): Promise<Backend> {
  const store = options.store;
  const storeTimeoutMs = options.storeTimeoutMs ?? DEFAULT_STORE_TIMEOUT_MS;
  if (store.startsWith("sqlite:")) {
    const target = parseSqliteStoreUrl(store);
    if (!target.memory) checkSqlitePath(store, target.path);
    try {
      const db = await SqliteDatabase.open({ path: target.path, storeTimeoutMs });
      return { kind: "sqlite", db, durable: !target.memory, description: store, storeTimeoutMs };
    } catch (err) {
      throw new StartupError(`${(err as Error).message}; check that the directory is writable and the file is a mecatl-drivers database`);
    }
  }
  if (isRedisStoreUrl(store)) {
    const { waitReplicas = 0, ...connect } = options.redis ?? {};
    const redis = await connectRedisClient({ ...connect, url: store, storeTimeoutMs });
    let writer: RedisClient | undefined;
    let keys: RedisKeys;
    try {
      if (waitReplicas > 0) {
        writer = await connectRedisClient({ ...connect, url: store, storeTimeoutMs, replicas: waitReplicas });
        setReplicaWait(redis, { replicas: waitReplicas, writer });
      }
      keys = await openRedisStore(redis, { prefix: options.redisKeyPrefix ?? DEFAULT_REDIS_KEY_PREFIX, storeTimeoutMs, mode: "serve", log: options.log });
      trackWriteRefusals(redis, keys, storeTimeoutMs);
    } catch (err) {
      redis.disconnect();
      writer?.disconnect();
      throw err instanceof StartupError ? err : new StartupError(`cannot open the Redis store: ${(err as Error).message}`);
    }
    return { kind: "redis", redis, writer, keys, durable: (connect.durability ?? "strict") === "strict", description: store, storeTimeoutMs };
  }
  throw new StartupError(`--store ${JSON.stringify(store)} is not a known store; ${KNOWN_STORES}`);
}

/**
 * Why writes to the backend cannot succeed now, or undefined when they can
 * (issue 9): SQLite worker stopped, database closed or disk full
 * (`SqliteDatabase.problem`); Redis not connected or, in strict mode, not
 * found durable by the last check (`DurabilityWatch.problem`) or not yet
 * checked since it reconnected; with `--redis-wait-replicas N`, the primary
 * the writer reaches (a cluster: any primary) has fewer than N replicas in
 * sync; Redis refused a write with OOM, MISCONF (a full disk included),
 * READONLY or NOREPLICAS and no probe write has succeeded since
 * (redis-write-refusal.ts; on a cluster, per primary). A connection that
 * cannot reconnect because Redis refuses the
 * credentials says so (redis-reconnect-cause.ts). One sentence,
 * stable while the condition lasts (logged once per change).
 */
export function backendProblem(backend: Backend): string | undefined {
  if (backend.kind === "sqlite") return backend.db.problem;
  return clientProblem(backend.redis) ?? (backend.writer === undefined ? undefined : clientProblem(backend.writer));
}

/** {@link backendProblem} of one Redis client: its connection's problem, else a write refusal (WriteRefusals.problem). */
function clientProblem(client: RedisClient): string | undefined {
  return connectionProblem(client) ?? writeRefusals(client)?.problem;
}

/** Why one Redis client cannot take writes for its connection: a single connection, or a cluster (ClusterDurability.problem). */
function connectionProblem(client: RedisClient): string | undefined {
  if (isCluster(client)) return clusterDurability(client)?.problem() ?? (client.status === "ready" ? undefined : "Redis Cluster connection lost; reconnecting");
  const lost = "Redis connection lost; reconnecting (and, in strict mode, verifying durability again)";
  const cause = reconnectCause(client);
  if (client.status !== "ready") return cause === undefined ? lost : `Redis connection lost; reconnecting: ${cause}`;
  const watch = durabilityWatch(client);
  if (watch === undefined) return undefined;
  return watch.problem ?? (watch.verified ? undefined : lost);
}

/** True when {@link backendProblem} finds nothing: health is SERVING. */
export function backendHealthy(backend: Backend): boolean {
  return backendProblem(backend) === undefined;
}

/**
 * Calls `listener` whenever the backend may have changed health; read the new
 * state with {@link backendHealthy}. Returns a function that stops listening.
 */
export function onBackendHealthChange(backend: Backend, listener: () => void): () => void {
  if (backend.kind === "sqlite") {
    backend.db.on("health", listener);
    return () => void backend.db.off("health", listener);
  }
  const stops = [backend.redis, backend.writer].filter((c): c is RedisClient => c !== undefined).map((c) => onClientChange(c, listener));
  return () => stops.forEach((stop) => stop());
}

/** {@link onBackendHealthChange} for one Redis client. */
function onClientChange(client: RedisClient, listener: () => void): () => void {
  const events = ["ready", "close", "end", "reconnecting", "error"];
  for (const e of events) client.on(e, listener);
  const watches: Array<EventEmitter | undefined> = [durabilityOf(client), writeRefusals(client)];
  for (const w of watches) w?.on("change", listener);
  return () => {
    for (const e of events) client.off(e, listener);
    for (const w of watches) w?.off("change", listener);
  };
}

/** The durability watch of one Redis client (a cluster's ClusterDurability, a single connection's DurabilityWatch), or undefined when it is not watched. */
function durabilityOf(client: RedisClient): EventEmitter | undefined {
  return isCluster(client) ? clusterDurability(client) : durabilityWatch(client);
}

/**
 * Calls `listener` with the outcome of every durability check of a Redis
 * backend (each node's, on a cluster; the writer connection's too with
 * `--redis-wait-replicas`); never for SQLite or a Redis that is not watched.
 * Returns a function that stops listening.
 */
export function onDurabilityCheck(backend: Backend, listener: (outcome: DurabilityCheckOutcome) => void): () => void {
  if (backend.kind === "sqlite") return () => undefined;
  const watches = [backend.redis, backend.writer].map((c) => (c === undefined ? undefined : durabilityOf(c))).filter((w): w is EventEmitter => w !== undefined);
  for (const w of watches) w.on("checked", listener);
  return () => watches.forEach((w) => w.off("checked", listener));
}

/** Closes the backend after in-flight work: waits for SQLite's queue, QUITs Redis (every node of a cluster). */
export async function closeBackend(backend: Backend): Promise<void> {
  if (backend.kind === "sqlite") return backend.db.close();
  await Promise.all([closeRedisClient(backend.redis), backend.writer === undefined ? undefined : closeRedisClient(backend.writer)]);
}
