import { Redis, type RedisOptions } from "ioredis";
import { readFileSync } from "node:fs";
import { isIP } from "node:net";
import { isLoopbackHost } from "../server/addresses.js";
import { guardRedisWrites, onReplicaShortfall } from "./redis-script.js";
import { DurabilityWatch, durabilityCheckTimeoutMs, readDurability } from "./redis-durability-watch.js";
import { credentialsRefused, trackReconnectCause } from "./redis-reconnect-cause.js";
import { speaksPlaintextRedis } from "./redis-plaintext-probe.js";
import { readCertificates } from "../../common/pem.js";

/** How strictly the Redis server's persistence is checked at start (docs/DESIGN.md principle 1). */
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
   * connection does not hold every later command (default: no limit). In
   * strict mode one durability check may take half of it (default 2500 ms)
   * before the server counts as not durable ({@link durabilityCheckTimeoutMs}).
   */
  storeTimeoutMs?: number;
  /**
   * `--redis-wait-replicas` of the connection writes go through (the
   * writer, redis-replicas.ts): while its primary has fewer replicas in
   * sync, health is NOT_SERVING and writes are refused before they are
   * sent (DurabilityWatch). 0 or absent for every other connection.
   */
  replicas?: number;
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
 * (docs/DESIGN.md "Backends"). In strict mode, and with `replicas` (the
 * `--redis-wait-replicas` writer), a {@link DurabilityWatch} keeps checking
 * afterwards (with `replicas`: that the primary has that many replicas in
 * sync, checked once before this returns), and every write script is
 * refused with a StoreFailure (UNAVAILABLE) while it cannot vouch for the
 * server ({@link DurabilityWatch.admit}). Why a reconnect fails, when Redis
 * refuses the credentials, is kept for health and errors
 * (redis-reconnect-cause.ts). The client reconnects forever with capped
 * backoff after that; callers watch `status` for health.
 *
 * @throws StartupError when the URL or files are bad, the server is
 *   unreachable within `connectTimeoutMs`, or its persistence is too weak.
 */
export async function connectRedis(options: RedisConnectOptions): Promise<Redis> {
  const target = parseRedisUrl(options.url, options.allowPlaintext ?? false);
  const nodeOptions = redisNodeOptions(options, target.tls, target.host);
  await refusePlaintextForTls(target, options.url);
  const redisOptions: RedisOptions = {
    ...nodeOptions,
    host: target.host,
    port: target.port,
    db: target.db,
    lazyConnect: true,
    enableAutoPipelining: true,
    // Refuse at once a command while disconnected (certainly not applied) rather than hold it.
    enableOfflineQueue: false,
    retryStrategy: (times) => Math.min(50 * 2 ** Math.min(times, 6), 2000),
  };
  const redis = new Redis(redisOptions);
  // Status changes are observed through health, not thrown; the last error
  // explains a failed first connection better than ioredis's "Connection is closed".
  let lastError: Error | undefined;
  // A reply ioredis cannot parse means the peer is no Redis; later errors ("Stream isn't writeable") only follow from it.
  let notResp: Error | undefined;
  redis.on("error", (err: Error) => {
    lastError = err;
    if (/Unknown RESP type|Protocol error/.test(err.message)) notResp ??= err;
  });
  try {
    await redis.connect();
  } catch (err) {
    redis.disconnect();
    const cause = lastError ?? (err as Error);
    if (notResp !== undefined) {
      throw new StartupError(`the server at ${target.host}:${target.port} does not speak the Redis protocol (${notResp.message}); check the address in --store`);
    }
    if (credentialsRefused(cause.message)) {
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
    await refuseClusterNode(redis, options.url);
    await verifyDatabase(redis, target.db, options.url);
  } catch (err) {
    redis.disconnect();
    throw err;
  }
  const strict = (options.durability ?? "strict") === "strict";
  const replicas = options.replicas ?? 0;
  if (strict) {
    try {
      await verifyDurability(redis);
    } catch (err) {
      redis.disconnect();
      throw err;
    }
  }
  if (strict || replicas > 0) {
    const watch = new DurabilityWatch(redis, { timeoutMs: durabilityCheckTimeoutMs(options.storeTimeoutMs ?? 5000), durability: strict, replicas });
    watches.set(redis, watch);
    guardRedisWrites(redis, () => watch.admit());
    // Too few replicas is a state of the deployment, not a configuration error: the server
    // starts, NOT_SERVING, and serves once they are back (README "Redis Cluster").
    if (replicas > 0) {
      onReplicaShortfall(redis, () => watch.recheck());
      await watch.check();
    }
  }
  trackReconnectCause(redis);
  return redis;
}

/**
 * The ioredis options every connection to one Redis node gets, single Redis
 * or cluster node alike: credentials read from their files, TLS with the CA
 * of `--redis-tls-ca` (SNI `host` when it is a name), and the exactly-once
 * settings of issue 9 (storage/redis-operation.ts retries, with the same
 * operation id, until --store-timeout): ioredis must never send a command
 * again by itself (a lost reply would apply it twice), and must fail a
 * command in flight as soon as its connection closes (maxRetriesPerRequest
 * 0: the command may have been applied).
 *
 * @throws StartupError when a file cannot be read, or `--redis-tls-ca` is
 *   given for a cleartext URL or holds no certificate.
 */
export function redisNodeOptions(options: RedisConnectOptions, tls: boolean, host: string | undefined): RedisOptions {
  const username = readSecret(options.usernameFile, "--redis-username-file");
  const password = readSecret(options.passwordFile, "--redis-password-file");
  if (options.tlsCaFile !== undefined && !tls) throw new StartupError("--redis-tls-ca applies to TLS stores (rediss://, rediss+cluster://) only; use one or drop the flag");
  const ca = options.tlsCaFile === undefined ? undefined : readCertificates(options.tlsCaFile, "--redis-tls-ca", StartupError).pem;
  return {
    username,
    password,
    // SNI carries names only (RFC 6066); Node warns on stderr when given an IP address.
    tls: tls ? { ca, servername: host !== undefined && isIP(host) === 0 ? host : undefined, minVersion: "TLSv1.2" } : undefined,
    // RESP2, as ioredis 5 spoke: the scripts' replies and the INFO / CLUSTER NODES parsing are
    // written for it, and a connection needs no HELLO round trip before its first command.
    protocol: 2,
    autoResendUnfulfilledCommands: false,
    maxRetriesPerRequest: 0,
    socketTimeout: options.storeTimeoutMs,
    connectTimeout: options.connectTimeoutMs ?? 5000,
  };
}

/**
 * Refuses a `redis://` URL that names a node of a Redis Cluster: commands
 * for keys of other nodes' slots would fail with MOVED.
 *
 * @throws StartupError pointing to `redis+cluster://`.
 */
async function refuseClusterNode(redis: Redis, url: string): Promise<void> {
  const info = await redis.info("cluster").catch(() => "");
  if (!/^cluster_enabled:1/m.test(info)) return;
  throw new StartupError(`--store ${JSON.stringify(url)} names a node of a Redis Cluster; use redis+cluster://HOST:PORT[,HOST:PORT...] (or rediss+cluster://) so every slot is reached`);
}

/**
 * Fails when `rediss://` points at a Redis that speaks cleartext (see
 * {@link speaksPlaintextRedis}), instead of letting the TLS handshake wait
 * for the connect timeout.
 *
 * @throws StartupError naming `--store` and the likely cause (issue 10, deliverable 4).
 */
export async function refusePlaintextForTls(target: { host: string; port: number; tls: boolean }, url: string): Promise<void> {
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
 * True when a failed CONFIG GET was refused by the server itself: the user
 * lacks the permission (`NOPERM`), or the command is disabled or renamed
 * (`unknown command`, `unknown subcommand`). Anything else (a closed
 * connection, a timeout, a reset) means the server could not be asked.
 */
export function configGetRefused(message: string): boolean {
  return /NOPERM|unknown (?:sub)?command/i.test(message);
}

/**
 * The start-up check: {@link readDurability}, turned into a one-line remedy
 * (naming `node`, e.g. `node 10.0.0.5:6379`, when given: a cluster node).
 * Only a CONFIG GET the server refused ({@link configGetRefused}) is
 * answered with "allow CONFIG GET or relax durability"; a server that could
 * not be asked (connection closed or lost, no answer: a node that just died,
 * a failover under way) is reported as unreachable, with "retry".
 *
 * @throws StartupError naming the setting to change (or `--redis-durability=relaxed`), or saying the server is unreachable.
 */
export async function verifyDurability(redis: Redis, node?: string): Promise<void> {
  let problem: string | undefined;
  const at = node === undefined ? "" : ` of ${node}`;
  try {
    problem = await readDurability(redis);
  } catch (err) {
    const message = (err as Error).message;
    if (configGetRefused(message)) {
      throw new StartupError(`cannot verify Redis durability${at} (CONFIG GET refused: ${message}); allow CONFIG GET for this user or pass --redis-durability=relaxed`);
    }
    const retry = node === undefined ? "start it or wait until it is up, then retry" : "a failover may be in progress; retry in a few seconds, once the cluster has recovered";
    throw new StartupError(`cannot verify Redis durability${at}: the ${node === undefined ? "server" : "node"} is unreachable (${message}); ${retry}`);
  }
  if (problem !== undefined) {
    throw new StartupError(
      `${problem}${node === undefined ? "" : ` (${node})`}: an acknowledged write could be lost; set "appendonly yes" and "appendfsync always" on the Redis server, or pass --redis-durability=relaxed to accept that risk`,
    );
  }
}

const watches = new WeakMap<object, DurabilityWatch>();

/** The watch {@link connectRedis} put on a connection (strict mode, or `--redis-wait-replicas`); undefined otherwise, and on a cluster (see ClusterDurability). */
export function durabilityWatch(redis: object): DurabilityWatch | undefined {
  return watches.get(redis);
}
