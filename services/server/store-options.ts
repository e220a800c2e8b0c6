import { Command, Option } from "commander";
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
 * credential files (never in the URL, docs/DESIGN.md "Backends"), `--redis-tls-ca`,
 * `--redis-allow-plaintext` and `--redis-key-prefix`.
 */
export function addStoreOptions(command: Command): Command {
  return command
    .option(
      "--store <url>",
      "sqlite:PATH, sqlite::memory: (tests; not durable), redis://HOST:PORT[/DB], rediss://HOST:PORT[/DB], or a Redis Cluster: redis+cluster://HOST:PORT[,HOST:PORT...] or rediss+cluster://... (seed nodes; the rest is discovered)",
      DEFAULT_STORE,
    )
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

/**
 * The Redis flags of {@link addStoreOptions} given a value other than their
 * default, by name (`--redis-password-file`, ..., `--redis-key-prefix` when
 * not `mecatl-drivers:`): with an SQLite store they would be accepted and
 * ignored, so `serve` and `copy` refuse them (issue 10, deliverable 4).
 */
export function redisFlagsGiven(f: StoreFlags): string[] {
  const given: Array<[string, boolean]> = [
    ["--redis-username-file", f.redisUsernameFile !== undefined],
    ["--redis-password-file", f.redisPasswordFile !== undefined],
    ["--redis-tls-ca", f.redisTlsCa !== undefined],
    ["--redis-allow-plaintext", f.redisAllowPlaintext === true],
    ["--redis-key-prefix", f.redisKeyPrefix !== undefined && f.redisKeyPrefix !== DEFAULT_REDIS_KEY_PREFIX],
  ];
  return given.filter(([, set]) => set).map(([flag]) => flag);
}

/** One side of a command that reads one store and writes another (`copy`): `from` or `to`. */
export type StoreSide = "from" | "to";

/**
 * Adds the store flags of {@link addStoreOptions} for one side of `copy`
 * (issue 14), named after the side: `--from URL` / `--to URL` instead of
 * `--store`, and `--from-redis-password-file`, `--to-redis-key-prefix`, ...
 * for the Redis flags, each with the same meaning and default as its
 * `serve` counterpart. `--from`/`--to` have no default.
 */
export function addSideStoreOptions(command: Command, side: StoreSide, what: string): Command {
  for (const o of addStoreOptions(new Command()).options) {
    const store = o.long === "--store";
    // A copy cannot reach sqlite::memory: (it lives inside its server process).
    const description = store ? o.description.replace(/sqlite::memory:[^,]*, /, "") : o.description;
    const option = new Option(o.flags.replace("--store", `--${side}`).replace("--redis-", `--${side}-redis-`), `${what}: ${description}`);
    if (!store && o.defaultValue !== undefined) option.default(o.defaultValue);
    command.addOption(option);
  }
  return command;
}

/**
 * The {@link StoreFlags} of one side from commander's values of the flags
 * {@link addSideStoreOptions} defined (`fromRedisKeyPrefix` → `redisKeyPrefix`, `from` → `store`).
 */
export function sideStoreFlags(values: Record<string, unknown>, side: StoreSide): StoreFlags {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(values)) {
    if (k === side) out.store = v;
    else if (k.startsWith(`${side}Redis`)) out[`redis${k.slice(side.length + "Redis".length)}`] = v;
  }
  return out as unknown as StoreFlags;
}
