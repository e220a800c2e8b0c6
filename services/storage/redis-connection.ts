import { Redis, type RedisOptions } from "ioredis";
import { EventEmitter } from "node:events";
import { readFileSync } from "node:fs";
import { isIP } from "node:net";
import { isLoopbackHost } from "../server/addresses.js";
import { defineRedisScripts, guardRedisWrites } from "./redis-script.js";
import { speaksPlaintextRedis } from "./redis-plaintext-probe.js";
import { readCertificates } from "../../common/pem.js";

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
}

/**
 * A configuration problem the operator must fix; the message says what to do.
 * `serve` prints it as one line and exits non-zero.
 */
export class StartupError extends Error {
  override name = "StartupError";
}

/**
 * Parses and checks a Redis store URL without connecting:
 * `redis://HOST[:PORT][/DB]` or `rediss://...` (TLS), port 1-65535 (default
 * 6379), DB a decimal database number (default 0; whether the server has it
 * is checked on connect, see {@link verifyDatabase}). Nothing else is
 * understood, so anything else is refused rather than ignored (issue 10,
 * deliverable 4): user info (credentials come from files), a query string,
 * a fragment, a path that is not a database number.
 *
 * @throws StartupError naming `--store` and the fix when the URL is malformed,
 *   has a part that is not understood, carries credentials, or is cleartext to
 *   a non-loopback host without `allowPlaintext`.
 */
export function parseRedisUrl(url: string, allowPlaintext: boolean): { host: string; port: number; db: number; tls: boolean } {
  const quoted = JSON.stringify(url);
  const form = "use redis://HOST:PORT[/DB] or rediss://HOST:PORT[/DB]";
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new StartupError(`--store ${quoted} is not a valid URL; ${form}`);
  }
  const tls = u.protocol === "rediss:";
  if (!tls && u.protocol !== "redis:") throw new StartupError(`--store ${quoted}: the scheme must be redis:// or rediss://`);
  if (!/^rediss?:\/\//.test(url)) throw new StartupError(`--store ${quoted} is not understood; ${form}`);
  if (u.username !== "" || u.password !== "" || /^rediss?:\/\/[^/?#]*@/.test(url)) {
    throw new StartupError("--store must not carry credentials; put them in files and pass --redis-username-file / --redis-password-file");
  }
  if (url.includes("?")) throw new StartupError(`--store ${quoted}: query parameters are not understood; remove everything from the "?" (${form}; other settings are flags, see serve --help)`);
  if (url.includes("#")) throw new StartupError(`--store ${quoted}: a fragment is not understood; remove everything from the "#" (${form})`);
  const host = u.hostname.replace(/^\[(.*)\]$/, "$1");
  if (host === "") throw new StartupError(`--store ${quoted} names no host; ${form}`);
  const port = u.port === "" ? 6379 : Number(u.port);
  if (port === 0) throw new StartupError(`--store ${quoted}: port 0 cannot be reached; give the port Redis listens on (default 6379)`);
  const dbText = u.pathname.replace(/^\//, "");
  if (dbText !== "" && !/^(0|[1-9][0-9]{0,8})$/.test(dbText)) {
    throw new StartupError(`--store ${quoted}: the path must be a database number such as /0 (the default) or /1, not ${JSON.stringify(u.pathname)}`);
  }
  const db = dbText === "" ? 0 : Number(dbText);
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
  if (options.tlsCaFile !== undefined && !target.tls) throw new StartupError("--redis-tls-ca applies to rediss:// only; use a rediss:// --store or drop the flag");
  const ca = options.tlsCaFile === undefined ? undefined : readCertificates(options.tlsCaFile, "--redis-tls-ca", StartupError).pem;
  await refusePlaintextForTls(target, options.url);
  const redisOptions: RedisOptions = {
    host: target.host,
    port: target.port,
    db: target.db,
    username,
    password,
    // SNI carries names only (RFC 6066); Node warns on stderr when given an IP address.
    tls: target.tls ? { ca, servername: isIP(target.host) === 0 ? target.host : undefined, minVersion: "TLSv1.2" } : undefined,
    lazyConnect: true,
    enableAutoPipelining: true,
    maxRetriesPerRequest: 1,
    enableOfflineQueue: true,
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
  try {
    await verifyDatabase(redis, target.db, options.url);
  } catch (err) {
    redis.disconnect();
    throw err;
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
      if (watch.problem !== undefined) throw new Error(`write refused: ${watch.problem}`);
    });
  }
  // Before any service command: see defineRedisScripts for why this cannot wait for first use.
  defineRedisScripts(redis);
  return redis;
}

/**
 * Fails when `rediss://` points at a Redis that speaks cleartext (see
 * {@link speaksPlaintextRedis}), instead of letting the TLS handshake wait
 * for the connect timeout.
 *
 * @throws StartupError naming `--store` and the likely cause (issue 10, deliverable 4).
 */
async function refusePlaintextForTls(target: { host: string; port: number; tls: boolean }, url: string): Promise<void> {
  if (!target.tls || !(await speaksPlaintextRedis(target.host, target.port))) return;
  throw new StartupError(
    `--store ${JSON.stringify(url)}: Redis at ${target.host}:${target.port} answers in cleartext, not TLS; enable TLS on the server (tls-port) or use redis:// (with --redis-allow-plaintext for a non-loopback host)`,
  );
}

/**
 * Checks that the database named by the URL exists: ioredis sends `SELECT`
 * on connect but ignores its failure and stays on database 0, which would mix
 * this store with whatever lives there (issue 10). Database 0 always exists.
 *
 * @throws StartupError naming `--store`, the database count (`CONFIG GET
 *   databases`, when allowed) and the fix.
 */
export async function verifyDatabase(redis: Redis, db: number, url: string): Promise<void> {
  if (db === 0) return;
  try {
    await redis.select(db);
  } catch (err) {
    const count = await redis.config("GET", "databases").then((r) => (r as string[])[1], () => undefined);
    const has = count === undefined ? "" : ` (it has ${count}: 0 to ${Number(count) - 1})`;
    throw new StartupError(
      `--store ${JSON.stringify(url)}: Redis has no database ${db}${has}: ${(err as Error).message}; choose a database that exists, or raise "databases" in the Redis configuration`,
    );
  }
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
