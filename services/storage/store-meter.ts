import type { RedisClient } from "./redis-client.js";
import { KNOWN_STORES, type Backend, type BackendOptions } from "./backend.js";
import { closeRedisClient } from "./redis-bulk-reader.js";
import { StartupError } from "./redis-connection.js";
import { connectRedisClient, isRedisStoreUrl } from "./redis-client.js";
import { RedisKeys } from "./redis-keys.js";
import { measureRedis } from "./redis-measure.js";
import { SqliteDatabase } from "./sqlite-database.js";
import type { KindSize } from "./store-kinds.js";

type Measured = { kind: "sqlite"; db: SqliteDatabase } | { kind: "redis"; redis: RedisClient; keys: RedisKeys };

/**
 * How long `stats` waits on a silent Redis, in milliseconds: a connection
 * with a command in flight that receives nothing for this long is taken for
 * dead, and the command fails (ioredis `socketTimeout`, as `--store-timeout`
 * sets it for `serve`). Without it, a Redis that accepts the connection and
 * never answers (stopped with SIGSTOP, or another program) held `stats`
 * forever. Each of its reads is one page of a scan, answered in milliseconds
 * even by a busy server.
 */
export const METER_STORE_TIMEOUT_MS = 10_000;

/**
 * Measures a store's size per kind (issue 14: the `mecatl_drivers_store_*`
 * metrics and `mecatl-drivers stats`). On SQLite it reads through a
 * read-only connection of its own on a worker thread of its own, so the
 * `dbstat` pass never delays the server's group commits; `sqlite::memory:`
 * is measured on the server's own connection (it cannot be shared, and it
 * is small). On Redis it uses the given connection.
 */
export class StoreMeter {
  private constructor(
    private readonly target: Measured,
    private readonly release: () => Promise<void>,
  ) {}

  /**
   * A meter beside a running server's backend.
   *
   * @throws Error when the read-only SQLite connection cannot be opened.
   */
  static async beside(backend: Backend): Promise<StoreMeter> {
    if (backend.kind === "redis") return new StoreMeter({ kind: "redis", redis: backend.redis, keys: backend.keys }, async () => undefined);
    if (backend.db.path === ":memory:") return new StoreMeter({ kind: "sqlite", db: backend.db }, async () => undefined);
    const reader = await SqliteDatabase.open({ path: backend.db.path, readonly: true });
    return new StoreMeter({ kind: "sqlite", db: reader }, () => reader.close());
  }

  /**
   * Opens the store `options.store` names for measuring only: an SQLite file
   * read-only (it must exist), or a Redis connection (durability not
   * required: nothing is written).
   *
   * @throws StartupError with a remedy for `sqlite::memory:` (private to its
   *   process), a missing or unreadable file, a bad URL, or an unreachable Redis.
   */
  static async open(options: BackendOptions): Promise<StoreMeter> {
    const store = options.store;
    if (store.startsWith("sqlite:")) {
      const path = store.slice("sqlite:".length);
      if (path === ":memory:" || path === "") throw new StartupError(`--store ${store}: give the path of an SQLite file (sqlite::memory: lives only inside its server process)`);
      try {
        const db = await SqliteDatabase.open({ path, readonly: true });
        return new StoreMeter({ kind: "sqlite", db }, () => db.close());
      } catch (err) {
        throw new StartupError(`${(err as Error).message}; check the path in --store`);
      }
    }
    if (isRedisStoreUrl(store)) {
      const redis = await connectRedisClient({ ...options.redis, durability: "relaxed", url: store, storeTimeoutMs: METER_STORE_TIMEOUT_MS });
      const keys = new RedisKeys(options.redisKeyPrefix ?? "mecatl-drivers:");
      return new StoreMeter({ kind: "redis", redis, keys }, () => closeRedisClient(redis));
    }
    throw new StartupError(`--store ${JSON.stringify(store)} is not a known store; ${KNOWN_STORES.replace("sqlite::memory:, ", "")}`);
  }

  /**
   * The size of every kind, `other` and (SQLite) `free`, in that order.
   *
   * @throws Error from SQLite or Redis when the store cannot be read.
   */
  measure(): Promise<KindSize[]> {
    return this.target.kind === "sqlite" ? this.target.db.call("store.measure", {}) : measureRedis(this.target.redis, this.target.keys);
  }

  /** Closes what the meter opened itself (never the server's own connections). */
  close(): Promise<void> {
    return this.release();
  }
}
