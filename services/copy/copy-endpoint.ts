import { connectRedisClient, isRedisStoreUrl, type RedisClient } from "../storage/redis-client.js";
import type { BackendOptions } from "../storage/backend.js";
import { closeRedisClient } from "../storage/redis-bulk-reader.js";
import { DEFAULT_REDIS_KEY_PREFIX, KNOWN_STORES } from "../storage/backend.js";
import { StartupError } from "../storage/redis-connection.js";
import { RedisKeys } from "../storage/redis-keys.js";
import { openRedisStore } from "../storage/redis-store.js";
import { RedisOperations } from "../storage/redis-operation.js";
import { SqliteDatabase } from "../storage/sqlite-database.js";
import { checkSqlitePath, parseSqliteStoreUrl } from "../storage/sqlite-path.js";
import { sqliteMigrations } from "../storage/sqlite-registry.js";
import type { KindStore, StoreKinds } from "../storage/copy/kind-store.js";
import { unlinkStore } from "../storage/copy/redis-scan.js";
import { redisIdentity, sqliteIdentity, type StoreIdentity } from "./store-identity.js";
import { RedisSessionCopy } from "../session-store/redis-copy.js";
import { RedisEventLogCopy } from "../event-log/redis-copy.js";
import { RedisLeaseCopy } from "../session-lease/redis-copy.js";
import { RedisScheduleCopy } from "../schedule-store/redis-copy.js";

/**
 * Milliseconds one store operation of a copy may take (a batch is a few MiB,
 * and a Redis server or disk busy with it answers slowly; nobody waits on
 * the other end).
 */
export const COPY_STORE_TIMEOUT_MS = 120_000;

/**
 * One side of `mecatl-drivers copy` (issue 14): a store opened for copying,
 * its records through the backend-neutral {@link StoreKinds}, and the few
 * things the copy itself keeps in a target: its progress record (for
 * `--resume`) and the erasure `--replace` asks for.
 */
export interface CopyEndpoint {
  /** The store URL, and for Redis the key prefix: how messages and the progress record name it. */
  readonly description: string;
  /** What the store physically is (file, servers, key base): how `copy` tells that --from and --to are one store whatever their text. */
  readonly identity: StoreIdentity;
  readonly kinds: StoreKinds;
  /** The progress record of an unfinished copy into this store, or undefined. */
  readProgress(): Promise<string | undefined>;
  /** Stores the progress record (durably, like every write). */
  writeProgress(text: string): Promise<void>;
  /** Removes the progress record. */
  clearProgress(): Promise<void>;
  /** Removes every record of every kind (and the progress record); on Redis only keys the store's layout defines (RedisKeys.owns). */
  erase(): Promise<void>;
  /** Closes what the endpoint opened. */
  close(): Promise<void>;
}

/** Options for {@link openCopyEndpoint}: the store flags of one side. */
export type CopyEndpointOptions = BackendOptions & { redis: NonNullable<BackendOptions["redis"]> };

/**
 * How a side is opened: `read` (a source, or both sides of `--verify-only`):
 * an existing store, never written; `write` (a copy's target): as `serve`
 * opens it.
 */
export type CopyAccess = "read" | "write";

/**
 * Called with the identity of the store being opened once it is known and
 * before anything is written to it (an SQLite file that does not exist yet
 * has none and skips the call); throwing refuses the store. `copy` refuses
 * a target that is its source here.
 */
export type AdmitStore = (identity: StoreIdentity) => void;

type OpName = Parameters<SqliteDatabase["call"]>[0];

/** A {@link KindStore} over three SQLite worker operations. */
function sqliteKind(db: SqliteDatabase, ids: OpName, read: OpName, write: OpName): KindStore<unknown> {
  const call = db.call.bind(db) as (op: OpName, args: unknown) => Promise<unknown>;
  return {
    ids: () => call(ids, {}) as Promise<string[]>,
    read: (requests) => call(read, { requests }) as ReturnType<KindStore<unknown>["read"]>,
    write: async (records) => void (await call(write, { records })),
  };
}

/**
 * Checks that a source file's schema is the one this build writes, so that
 * it can be read without migrating it (a source is opened read-only).
 *
 * @throws StartupError saying how to upgrade an older file or which build to use for a newer one.
 */
async function checkSourceSchema(db: SqliteDatabase, store: string): Promise<void> {
  const have = new Map((await db.call("copy.schema", {})).map((r) => [r.component, r.version]));
  for (const m of sqliteMigrations) {
    const version = have.get(m.component) ?? 0;
    const latest = Math.max(...sqliteMigrations.filter((x) => x.component === m.component).map((x) => x.version));
    if (version < latest) {
      throw new StartupError(`${store} was written by an older mecatl-drivers (${m.component} schema ${version}, this build writes ${latest}): start \`mecatl-drivers serve --store ${store}\` once to upgrade it, then copy`);
    }
    if (version > latest) throw new StartupError(`${store} was written by a newer mecatl-drivers (${m.component} schema ${version}); copy it with that build`);
  }
}

async function openSqlite(store: string, access: CopyAccess, admit: AdmitStore): Promise<CopyEndpoint> {
  const target = parseSqliteStoreUrl(store);
  if (target.memory) throw new StartupError(`--store ${store}: sqlite::memory: lives only inside its own process; copy from or to an SQLite file`);
  if (access === "write") checkSqlitePath(store, target.path);
  const before = sqliteIdentity(target.path);
  if (before === undefined && access === "read") throw new StartupError(`--store ${store}: no such file; a missing SQLite file holds no store to read (check the path in --store)`);
  if (before !== undefined) admit(before);
  let db: SqliteDatabase;
  try {
    db = await SqliteDatabase.open({ path: target.path, readonly: access === "read", storeTimeoutMs: COPY_STORE_TIMEOUT_MS });
  } catch (err) {
    throw new StartupError(`${(err as Error).message}; check the path in --store`);
  }
  let identity: StoreIdentity;
  try {
    identity = sqliteIdentity(target.path) ?? before!;
    if (access === "read") await checkSourceSchema(db, store);
  } catch (err) {
    await db.close();
    throw err;
  }
  const kinds: StoreKinds = {
    sessions: sqliteKind(db, "session.copy.ids", "session.copy.read", "session.copy.write"),
    lineage: sqliteKind(db, "session.copy.lineageIds", "session.copy.lineageRead", "session.copy.lineageWrite"),
    events: sqliteKind(db, "events.copy.ids", "events.copy.read", "events.copy.write"),
    leases: sqliteKind(db, "lease.copy.ids", "lease.copy.read", "lease.copy.write"),
    schedules: sqliteKind(db, "schedule.copy.ids", "schedule.copy.read", "schedule.copy.write"),
    fires: sqliteKind(db, "schedule.copy.fireIds", "schedule.copy.fireRead", "schedule.copy.fireWrite"),
  };
  return {
    description: store,
    identity,
    kinds,
    readProgress: () => db.call("copy.progress.read", {}),
    writeProgress: (text) => db.call("copy.progress.write", { text }),
    clearProgress: () => db.call("copy.progress.clear", {}),
    async erase() {
      await Promise.all([db.call("session.copy.erase", {}), db.call("events.copy.erase", {}), db.call("lease.copy.erase", {}), db.call("schedule.copy.erase", {}), db.call("copy.progress.clear", {})]);
    },
    close: () => db.close(),
  };
}

async function openRedis(options: CopyEndpointOptions, access: CopyAccess, admit: AdmitStore): Promise<CopyEndpoint> {
  // A store only read: its durability does not matter. A target must be as durable as `serve` requires (or relaxed, when asked).
  const durability = access === "read" ? "relaxed" : (options.redis.durability ?? "strict");
  const redis: RedisClient = await connectRedisClient({ ...options.redis, durability, url: options.store, storeTimeoutMs: COPY_STORE_TIMEOUT_MS });
  const prefix = options.redisKeyPrefix ?? DEFAULT_REDIS_KEY_PREFIX;
  let keys: RedisKeys;
  let identity: StoreIdentity;
  try {
    identity = await redisIdentity(redis, new RedisKeys(prefix).base);
    admit(identity);
    keys = await openRedisStore(redis, { prefix, storeTimeoutMs: COPY_STORE_TIMEOUT_MS, mode: access === "read" ? "read" : "serve" });
  } catch (err) {
    redis.disconnect();
    throw err;
  }
  const ops = new RedisOperations(redis, COPY_STORE_TIMEOUT_MS);
  const sessions = new RedisSessionCopy(ops, keys);
  const schedules = new RedisScheduleCopy(ops, keys);
  const progressKey = keys.copyProgress();
  return {
    description: `${options.store} (key prefix ${JSON.stringify(prefix)})`,
    identity,
    kinds: {
      sessions: sessions.sessions as KindStore<unknown>,
      lineage: sessions.lineage as KindStore<unknown>,
      events: new RedisEventLogCopy(ops, keys) as KindStore<unknown>,
      leases: new RedisLeaseCopy(ops, keys) as KindStore<unknown>,
      schedules: schedules.schedules as KindStore<unknown>,
      fires: schedules.fires as KindStore<unknown>,
    },
    readProgress: async () => (await ops.read((r) => r.get(progressKey))) ?? undefined,
    writeProgress: async (text) => void (await ops.read((r) => r.set(progressKey, text))),
    clearProgress: async () => void (await ops.read((r) => r.del(progressKey))),
    erase: () => unlinkStore(ops, keys),
    close: () => closeRedisClient(redis),
  };
}

/**
 * Opens one side of a copy: for `read`, an existing store, read-only (an
 * SQLite file that must exist, without migrating it and without leaving
 * `-wal`/`-shm` files it did not have; a Redis server without requiring
 * durability); for `write`, as `serve` would open it (SQLite: created if
 * missing, migrated; Redis: durable unless relaxed). `admit` sees the
 * store's identity before anything is written to it.
 *
 * @throws StartupError with a remedy for an unknown or malformed URL,
 *   `sqlite::memory:`, a missing (`read`) or unreadable file, an SQLite file
 *   read of another build's schema, an unreachable Redis, a Redis that does
 *   not say who it is (INFO refused) or a non-durable Redis target; whatever
 *   `admit` throws.
 */
export function openCopyEndpoint(options: CopyEndpointOptions, access: CopyAccess, admit: AdmitStore = () => undefined): Promise<CopyEndpoint> {
  if (options.store.startsWith("sqlite:")) return openSqlite(options.store, access, admit);
  if (isRedisStoreUrl(options.store)) return openRedis(options, access, admit);
  return Promise.reject(new StartupError(`--store ${JSON.stringify(options.store)} is not a known store; ${KNOWN_STORES.replace("sqlite::memory:, ", "")}`));
}
