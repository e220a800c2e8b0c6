import type { Redis } from "ioredis";
import { SqliteDatabase } from "./sqlite-database.js";
import { connectRedis, durabilityWatch, StartupError, type RedisConnectOptions } from "./redis-connection.js";
import { RedisKeys } from "./redis-keys.js";
import type { StoreFailure } from "./store-failure.js";

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

/** The shared backend: one Redis server (standalone), reached through ioredis. */
export interface RedisBackend {
  readonly kind: "redis";
  readonly redis: Redis;
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
  /** `sqlite:PATH`, `sqlite::memory:`, `redis://HOST:PORT[/DB]` or `rediss://...`. */
  store: string;
  /** Redis settings besides the URL. */
  redis?: Omit<RedisConnectOptions, "url">;
  /** Redis key prefix (`--redis-key-prefix`, default `mecatl-drivers:`). */
  redisKeyPrefix?: string;
  /**
   * Milliseconds one store operation may take, retries included, before the
   * call fails with UNAVAILABLE (`--store-timeout`, default
   * {@link DEFAULT_STORE_TIMEOUT_MS}; issue 9).
   */
  storeTimeoutMs?: number;
}

/** Default of `--store-timeout`: 5 s. */
export const DEFAULT_STORE_TIMEOUT_MS = 5000;

/**
 * Opens the store named by `--store`.
 *
 * @throws StartupError with a one-line remedy when the URL is unknown, the
 *   SQLite file cannot be opened, or Redis is unreachable or not durable.
 */
export async function openBackend(options: BackendOptions): Promise<Backend> {
  const store = options.store;
  const storeTimeoutMs = options.storeTimeoutMs ?? DEFAULT_STORE_TIMEOUT_MS;
  if (store.startsWith("sqlite:")) {
    const path = store.slice("sqlite:".length);
    if (path === "") throw new StartupError("--store sqlite: needs a path, e.g. sqlite:./data/mecatl-drivers.sqlite");
    try {
      // A write waits for another process's lock at most as long as any store operation may take.
      const db = await SqliteDatabase.open({ path, busyTimeoutMs: storeTimeoutMs });
      return { kind: "sqlite", db, durable: path !== ":memory:", description: store, storeTimeoutMs };
    } catch (err) {
      throw new StartupError(`${(err as Error).message}; check that the directory is writable and the file is a mecatl-drivers database`);
    }
  }
  if (store.startsWith("redis://") || store.startsWith("rediss://")) {
    const keys = new RedisKeys(options.redisKeyPrefix ?? "mecatl-drivers:");
    const redis = await connectRedis({ ...options.redis, url: store });
    return { kind: "redis", redis, keys, durable: (options.redis?.durability ?? "strict") === "strict", description: store, storeTimeoutMs };
  }
  throw new StartupError(`--store ${JSON.stringify(store)} is not a known store; use sqlite:PATH, sqlite::memory:, redis://HOST:PORT[/DB] or rediss://HOST:PORT[/DB]`);
}

/**
 * True when the backend can currently serve requests: SQLite worker alive;
 * Redis connected and, in strict mode, still found durable.
 */
export function backendHealthy(backend: Backend): boolean {
  if (backend.kind === "sqlite") return backend.db.healthy;
  return backend.redis.status === "ready" && durabilityWatch(backend.redis)?.problem === undefined;
}

/**
 * Calls `listener` whenever the backend may have changed health; read the new
 * state with {@link backendHealthy}. Returns a function that stops listening.
 */
export function onBackendHealthChange(backend: Backend, listener: () => void): () => void {
  const emitter = backend.kind === "sqlite" ? backend.db : backend.redis;
  const events = backend.kind === "sqlite" ? ["fault"] : ["ready", "close", "end", "reconnecting", "error"];
  for (const e of events) emitter.on(e, listener);
  const watch = backend.kind === "redis" ? durabilityWatch(backend.redis) : undefined;
  watch?.on("change", listener);
  return () => {
    for (const e of events) emitter.off(e, listener);
    watch?.off("change", listener);
  };
}

/** Closes the backend after in-flight work: waits for SQLite's queue, QUITs Redis. */
export async function closeBackend(backend: Backend): Promise<void> {
  if (backend.kind === "sqlite") await backend.db.close();
  else await backend.redis.quit().catch(() => backend.redis.disconnect());
}
