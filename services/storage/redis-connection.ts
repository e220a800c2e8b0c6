import { Redis, type RedisOptions } from "ioredis";
import { EventEmitter } from "node:events";
import { readFileSync } from "node:fs";
import { isLoopbackHost } from "../server/addresses.js";
import { defineRedisScripts, guardRedisWrites } from "./redis-script.js";
import { StoreFailure } from "./store-failure.js";

/** How strictly the Redis server's persistence is checked at start (DESIGN.md principle 1). */
export type RedisDurability = "strict" | "relaxed";

/** Options for {@link connectRedis}, from `serve` flags. */
export interface RedisConnectOptions {
  /** `redis://HOST:PORT[/DB]` or `rediss://HOST:PORT[/DB]`; must carry no credentials. */
  url: string;
  /** File holding the ACL user name (`--redis-username-file`). */
  usernameFile?: string;
  /** File holding the password (`--redis-password-file`). */
  passwordFile?: string;
  /** PEM CA bundle for `rediss://` (`--redis-tls-ca`); system roots otherwise. */
  tlsCaFile?: string;
  /** Permit cleartext `redis://` to a non-loopback host (`--redis-allow-plaintext`). */
  allowPlaintext?: boolean;
  /** `strict` (default) refuses a server without `appendonly yes` + `appendfsync always`. */
  durability?: RedisDurability;
  /** Milliseconds to wait for the first connection (default 5000). */
  connectTimeoutMs?: number;
  /**
   * `--store-timeout` in milliseconds: a connection that has commands in
   * flight and receives nothing for this long is taken for dead, closed and
   * reopened (ioredis `socketTimeout`), so a stalled or black-holed
   * connection does not hold every later command. Default: no limit.
   */
  storeTimeoutMs?: number;
}

/**
 * A configuration problem the operator must fix; the message says what to do.
 * `serve` prints it as one line and exits non-zero.
 */
export class StartupError extends Error {
  override name = "StartupError";
}

/**
 * Parses and checks a Redis store URL without connecting.
 *
 * @throws StartupError when the URL is malformed, carries credentials, or is
 *   cleartext to a non-loopback host without `allowPlaintext`.
 */
export function parseRedisUrl(url: string, allowPlaintext: boolean): { host: string; port: number; db: number; tls: boolean } {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new StartupError(`--store ${JSON.stringify(url)} is not a valid URL; use redis://HOST:PORT[/DB]`);
  }
  const tls = u.protocol === "rediss:";
  if (!tls && u.protocol !== "redis:") throw new StartupError(`--store ${JSON.stringify(url)}: the scheme must be redis:// or rediss://`);
  if (u.username !== "" || u.password !== "") {
    throw new StartupError("--store must not carry credentials; put them in files and pass --redis-username-file / --redis-password-file");
  }
  const host = u.hostname.replace(/^\[(.*)\]$/, "$1");
  if (host === "") throw new StartupError(`--store ${JSON.stringify(url)} names no host`);
  const port = u.port === "" ? 6379 : Number(u.port);
  const dbText = u.pathname.replace(/^\//, "");
  const db = dbText === "" ? 0 : Number(dbText);
  if (!Number.isInteger(db) || db < 0) throw new StartupError(`--store ${JSON.stringify(url)}: the database number must be a non-negative integer`);
  if (!tls && !allowPlaintext && !isLoopbackHost(host)) {
    throw new StartupError(
      `refusing cleartext Redis to non-loopback host ${host}; use rediss:// (with --redis-tls-ca if needed) or pass --redis-allow-plaintext`,
    );
  }
  return { host, port, db, tls };
}

function readSecret(file: string | undefined, flag: string): string | undefined {
  if (file === undefined) return undefined;
  try {
    return readFileSync(file, "utf8").trim();
  } catch (err) {
    throw new StartupError(`cannot read ${flag} ${file}: ${(err as Error).message}`);
  }
}

/**
 * Connects to Redis, waits until it answers, and checks durability: with
 * `durability` strict (the default) the server must run with `appendonly yes`
 * and `appendfsync always`, so that an acknowledged write is on disk
 * (DESIGN.md "Backends"). In strict mode a {@link DurabilityWatch} keeps
 * checking afterwards. Every declared Lua script is defined on the
 * connection before it is returned. The client reconnects forever with capped
 * backoff after that; callers watch `status` for health.
 *
 * @throws StartupError when the URL or files are bad, the server is
 *   unreachable within `connectTimeoutMs`, or its persistence is too weak.
 */
export async function connectRedis(options: RedisConnectOptions): Promise<Redis> {
  const target = parseRedisUrl(options.url, options.allowPlaintext ?? false);
  const username = readSecret(options.usernameFile, "--redis-username-file");
  const password = readSecret(options.passwordFile, "--redis-password-file");
  const ca = options.tlsCaFile === undefined ? undefined : readSecret(options.tlsCaFile, "--redis-tls-ca");
  const redisOptions: RedisOptions = {
    host: target.host,
    port: target.port,
    db: target.db,
    username,
    password,
    tls: target.tls ? { ca, servername: target.host, minVersion: "TLSv1.2" } : undefined,
    lazyConnect: true,
    enableAutoPipelining: true,
    // Exactly-once and bounded calls (issue 9; storage/redis-operation.ts retries,
    // with the same operation id, until --store-timeout): ioredis must never send
    // a command again by itself (a lost reply would apply it twice), must fail a
    // command in flight as soon as its connection closes (maxRetriesPerRequest 0:
    // the command may have been applied), and must refuse at once a command while
    // disconnected (no offline queue: certainly not applied) rather than hold it.
    autoResendUnfulfilledCommands: false,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    socketTimeout: options.storeTimeoutMs,
    connectTimeout: options.connectTimeoutMs ?? 5000,
    retryStrategy: (times) => Math.min(50 * 2 ** Math.min(times, 6), 2000),
  };
  const redis = new Redis(redisOptions);
  // Status changes are observed through health, not thrown; the last error
  // explains a failed first connection better than ioredis's "Connection is closed".
  let lastError: Error | undefined;
  redis.on("error", (err: Error) => (lastError = err));
  try {
    await redis.connect();
  } catch (err) {
    redis.disconnect();
    const cause = lastError ?? (err as Error);
    if (/WRONGPASS|NOAUTH|NOPERM|invalid username-password/i.test(cause.message)) {
      throw new StartupError(`Redis at ${target.host}:${target.port} refused the credentials (${cause.message}); check --redis-username-file and --redis-password-file`);
    }
    throw new StartupError(`cannot reach Redis at ${target.host}:${target.port}: ${cause.message}; start it or fix --store`);
  }
  try {
    await redis.ping();
  } catch (err) {
    redis.disconnect();
    const message = (err as Error).message;
    throw new StartupError(
      /NOAUTH|WRONGPASS|NOPERM/.test(message)
        ? `Redis at ${target.host}:${target.port} refused the credentials (${message}); check --redis-username-file and --redis-password-file`
        : `Redis at ${target.host}:${target.port} is not ready (${message}); retry once it has loaded its data`,
    );
  }
  if ((options.durability ?? "strict") === "strict") {
    try {
      await verifyDurability(redis);
    } catch (err) {
      redis.disconnect();
      throw err;
    }
    const watch = new DurabilityWatch(redis);
    watches.set(redis, watch);
    guardRedisWrites(redis, () => {
      if (watch.problem !== undefined) throw new StoreFailure("not_durable", `Redis is not known to be durable, the write was refused and nothing was written: ${watch.problem}`);
    });
  }
  // Before any service command: see defineRedisScripts for why this cannot wait for first use.
  defineRedisScripts(redis);
  return redis;
}

/**
 * Reads `appendonly` and `appendfsync` with CONFIG GET.
 *
 * @throws StartupError naming the setting to change (or `--redis-durability=relaxed`).
 */
export async function verifyDurability(redis: Redis): Promise<void> {
  let appendonly: string | undefined;
  let appendfsync: string | undefined;
  try {
    appendonly = ((await redis.config("GET", "appendonly")) as string[])[1];
    appendfsync = ((await redis.config("GET", "appendfsync")) as string[])[1];
  } catch (err) {
    throw new StartupError(
      `cannot verify Redis durability (CONFIG GET failed: ${(err as Error).message}); allow CONFIG GET for this user or pass --redis-durability=relaxed`,
    );
  }
  if (appendonly !== "yes" || appendfsync !== "always") {
    throw new StartupError(
      `Redis is not durable (appendonly=${appendonly}, appendfsync=${appendfsync}): an acknowledged write could be lost; set "appendonly yes" and "appendfsync always" on the Redis server, or pass --redis-durability=relaxed to accept that risk`,
    );
  }
}

/** Milliseconds between two durability checks of a running strict-mode connection. */
export const DURABILITY_CHECK_MS = 5000;

const watches = new WeakMap<Redis, DurabilityWatch>();

/** The watch {@link connectRedis} put on a strict-mode connection; undefined in relaxed mode. */
export function durabilityWatch(redis: Redis): DurabilityWatch | undefined {
  return watches.get(redis);
}

/**
 * Keeps checking that a Redis server found durable at start stays durable
 * (DESIGN.md principle 1): after every reconnect, since the server may have
 * been restarted with another configuration (say without `appendonly`, and
 * so without its data), and every `intervalMs` (a `CONFIG SET`). While the
 * last check failed, {@link problem} says why: health is NOT_SERVING and
 * every write script is refused; the next good check lifts both. Emits
 * `change` whenever {@link problem} changes.
 *
 * Commands queued by ioredis while the connection was down are sent as soon
 * as it is back, before the first check can answer; those few writes are not
 * covered.
 */
export class DurabilityWatch extends EventEmitter {
  /** Why the server is not known to be durable, or undefined when the last check passed. */
  problem: string | undefined;
  private readonly timer: NodeJS.Timeout;
  private running: Promise<void> | undefined;
  private again = false;

  constructor(
    private readonly redis: Redis,
    intervalMs = DURABILITY_CHECK_MS,
  ) {
    super();
    redis.on("ready", () => void this.check());
    redis.once("end", () => clearInterval(this.timer));
    this.timer = setInterval(() => void this.check(), intervalMs);
    this.timer.unref();
  }

  /** Checks now (or once more after a check in progress); resolves when done. */
  check(): Promise<void> {
    if (this.running !== undefined) {
      this.again = true;
      return this.running;
    }
    this.running = (async () => {
      do {
        this.again = false;
        if (this.redis.status !== "ready") continue;
        try {
          await verifyDurability(this.redis);
          this.set(undefined);
        } catch (err) {
          // A check cut short by a lost connection proves nothing; the reconnect checks again.
          if (this.redis.status === "ready") this.set((err as Error).message);
        }
      } while (this.again);
      this.running = undefined;
    })();
    return this.running;
  }

  private set(problem: string | undefined): void {
    if (problem === this.problem) return;
    this.problem = problem;
    this.emit("change");
  }
}
