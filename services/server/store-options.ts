import type { Command } from "commander";
import { DEFAULT_REDIS_KEY_PREFIX, type BackendOptions } from "../storage/backend.js";

/** Default of `--store`: an SQLite file under `./data`. */
export const DEFAULT_STORE = "sqlite:./data/mecatl-drivers.sqlite";

/** Commander's values of the flags {@link addStoreOptions} defines. */
export interface StoreFlags {
  store: string;
  redisUsernameFile?: string;
  redisPasswordFile?: string;
  redisTlsCa?: string;
  redisAllowPlaintext: boolean;
  redisKeyPrefix: string;
}

/**
 * Adds the flags that name a store and how to reach it, shared by every
 * command that opens a store itself (`serve`, `stats`): `--store`, the Redis
 * credential files (never in the URL, DESIGN.md "Backends"), `--redis-tls-ca`,
 * `--redis-allow-plaintext` and `--redis-key-prefix`.
 */
export function addStoreOptions(command: Command): Command {
  return command
    .option("--store <url>", "sqlite:PATH, sqlite::memory: (tests; not durable), redis://HOST:PORT[/DB] or rediss://HOST:PORT[/DB]", DEFAULT_STORE)
    .option("--redis-username-file <file>", "Redis ACL user name, read from this file")
    .option("--redis-password-file <file>", "Redis password, read from this file")
    .option("--redis-tls-ca <file>", "PEM CA bundle that signs the Redis server certificate (rediss://)")
    .option("--redis-allow-plaintext", "allow cleartext redis:// to a non-loopback host", false)
    .option("--redis-key-prefix <prefix>", "prefix of every Redis key", DEFAULT_REDIS_KEY_PREFIX);
}

/** The {@link BackendOptions} the store flags give (the caller adds durability and timeouts). */
export function storeBackendOptions(f: StoreFlags): BackendOptions & { redis: NonNullable<BackendOptions["redis"]> } {
  return {
    store: f.store,
    redisKeyPrefix: f.redisKeyPrefix,
    redis: { usernameFile: f.redisUsernameFile, passwordFile: f.redisPasswordFile, tlsCaFile: f.redisTlsCa, allowPlaintext: f.redisAllowPlaintext },
  };
}
