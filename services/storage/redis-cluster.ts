import { Cluster, type ClusterOptions } from "ioredis";
import { isLoopbackHost } from "../server/addresses.js";
import { redisNodeOptions, refusePlaintextForTls, verifyDurability, StartupError, type RedisConnectOptions } from "./redis-connection.js";
import { ClusterDurability } from "./redis-cluster-durability.js";
import { durabilityCheckTimeoutMs } from "./redis-durability-watch.js";
import { credentialsRefused } from "./redis-reconnect-cause.js";
import { guardRedisWrites, onReplicaShortfall } from "./redis-script.js";

const clusterHealth = new WeakMap<Cluster, ClusterDurability>();

/** The per-node durability and slot coverage watch {@link connectRedisCluster} put on a cluster client. */
export function clusterDurability(cluster: Cluster): ClusterDurability | undefined {
  return clusterHealth.get(cluster);
}

/** A seed node of a Redis Cluster URL. */
export interface ClusterSeed {
  host: string;
  port: number;
}

/** True when `url` names a Redis Cluster store (`redis+cluster://`, `rediss+cluster://`). */
export function isClusterUrl(url: string): boolean {
  return /^rediss?\+cluster:\/\//.test(url);
}

/**
 * Parses and checks a Redis Cluster store URL without connecting:
 * `redis+cluster://HOST[:PORT][,HOST[:PORT]...]` or `rediss+cluster://...`
 * (TLS), each port 1-65535 (default 6379). The hosts are seeds: the client
 * learns the rest of the cluster from them (CLUSTER SLOTS), so one reachable
 * seed is enough. As for `redis://` (issue 10, deliverable 4), anything not
 * understood is refused rather than ignored: user info (credentials come
 * from files), a path (a cluster has database 0 only), a query string, a
 * fragment, an empty seed.
 *
 * @throws StartupError naming `--store` and the fix when the URL is malformed,
 *   has a part that is not understood, carries credentials, or is cleartext to
 *   a non-loopback seed without `allowPlaintext`.
 */
export function parseRedisClusterUrl(url: string, allowPlaintext: boolean): { seeds: ClusterSeed[]; tls: boolean } {
  const quoted = JSON.stringify(url);
  const form = "use redis+cluster://HOST:PORT[,HOST:PORT...] or rediss+cluster://HOST:PORT[,HOST:PORT...]";
  const m = /^(rediss?)\+cluster:\/\/(.*)$/s.exec(url);
  if (m === null) throw new StartupError(`--store ${quoted} is not understood; ${form}`);
  const tls = m[1] === "rediss";
  const rest = m[2]!;
  if (rest.includes("@")) throw new StartupError("--store must not carry credentials; put them in files and pass --redis-username-file / --redis-password-file");
  if (rest.includes("?")) throw new StartupError(`--store ${quoted}: query parameters are not understood; remove everything from the "?" (${form}; other settings are flags, see serve --help)`);
  if (rest.includes("#")) throw new StartupError(`--store ${quoted}: a fragment is not understood; remove everything from the "#" (${form})`);
  if (rest.includes("/")) throw new StartupError(`--store ${quoted}: a Redis Cluster has database 0 only, so the URL takes no path; remove everything from the "/" (${form})`);
  const seeds = rest.split(",").map((seed): ClusterSeed => {
    if (seed === "") throw new StartupError(`--store ${quoted} names an empty seed node; ${form}`);
    let u: URL;
    try {
      u = new URL(`redis://${seed}`);
    } catch {
      throw new StartupError(`--store ${quoted}: seed ${JSON.stringify(seed)} is not HOST[:PORT]; ${form}`);
    }
    const host = u.hostname.replace(/^\[(.*)\]$/, "$1");
    if (host === "" || u.pathname !== "" || u.username !== "") throw new StartupError(`--store ${quoted}: seed ${JSON.stringify(seed)} is not HOST[:PORT]; ${form}`);
    const port = u.port === "" ? 6379 : Number(u.port);
    if (port === 0) throw new StartupError(`--store ${quoted}: port 0 cannot be reached; give the port each seed node listens on (default 6379)`);
    if (!tls && !allowPlaintext && !isLoopbackHost(host)) {
      throw new StartupError(`refusing cleartext Redis to non-loopback host ${host}; use rediss+cluster:// (with --redis-tls-ca if needed) or pass --redis-allow-plaintext`);
    }
    return { host, port };
  });
  return { seeds, tls };
}

/** `host:port` of a seed, brackets around an IPv6 address. */
function seedName(s: ClusterSeed): string {
  return s.host.includes(":") ? `[${s.host}]:${s.port}` : `${s.host}:${s.port}`;
}

/**
 * Milliseconds between two periodic refreshes of the cluster's slot map
 * (CLUSTER SLOTS to one node): how soon, at the latest, a failover or a slot
 * migration is noticed when no command has been redirected.
 */
export const SLOTS_REFRESH_MS = 1000;

/**
 * Connects to a Redis Cluster through its seeds, waits until the client has
 * the slot map and the cluster reports `cluster_state:ok`, and, with
 * `durability` strict (the default), checks that every node (primaries and
 * replicas: a replica becomes a primary on failover) runs with `appendonly
 * yes` and `appendfsync always`; a {@link ClusterDurability} keeps checking
 * every node afterwards, and guards every write script by the primary of its
 * key's slot. With `replicas` (the `--redis-wait-replicas` writer) the
 * watches also count each primary's replicas in sync, checked once before
 * this returns.
 *
 * The client follows MOVED and ASK redirections and TRYAGAIN by itself
 * (the command was not run, so sending it again is safe), and never sends a
 * command again after its connection failed or while the cluster is down:
 * those errors reach storage/redis-operation.ts, which retries with the same
 * operation id (exactly once, issue 9). Node connections carry the same
 * options as a single-Redis connection ({@link redisNodeOptions}).
 *
 * @throws StartupError when the URL or files are bad, no seed answers within
 *   `connectTimeoutMs`, a seed is not a cluster node, the credentials are
 *   refused, or a node's persistence is too weak.
 */
export async function connectRedisCluster(options: RedisConnectOptions): Promise<Cluster> {
  const target = parseRedisClusterUrl(options.url, options.allowPlaintext ?? false);
  const names = target.seeds.map(seedName).join(", ");
  const nodeOptions = redisNodeOptions(options, target.tls, undefined);
  for (const s of target.seeds) await refusePlaintextForTls({ ...s, tls: target.tls }, options.url);
  const connectTimeoutMs = options.connectTimeoutMs ?? 5000;
  const clusterOptions: ClusterOptions = {
    redisOptions: nodeOptions,
    lazyConnect: true,
    enableAutoPipelining: true,
    // Scripts (storage/redis-script.ts) are sent one by one, each to the node of its first key: a cluster
    // client groups auto-pipelined commands by the slot of their first argument, which for EVALSHA and EVAL
    // is the script, not a key, so scripts for different nodes would share a pipeline, and it would fail whole.
    autoPipeliningIgnoredCommands: ["evalsha", "eval"],
    // Exactly once (issue 9): a command refused while the cluster is not ready
    // was certainly not run; one cut off by a lost connection or CLUSTERDOWN is
    // judged and retried by redis-operation.ts, never re-sent here.
    enableOfflineQueue: false,
    retryDelayOnFailover: 0,
    retryDelayOnClusterDown: 0,
    retryDelayOnTryAgain: 50,
    slotsRefreshInterval: SLOTS_REFRESH_MS,
    slotsRefreshTimeout: Math.min(connectTimeoutMs, 2000),
    clusterRetryStrategy: (times) => Math.min(50 * 2 ** Math.min(times, 6), 2000),
    // With TLS the certificate names the host as written; do not swap it for an address.
    dnsLookup: target.tls ? (address, callback) => callback(null, address, 0) : undefined,
  };
  const cluster = new Cluster(target.seeds, clusterOptions);
  let lastError: Error | undefined;
  cluster.on("error", (err: Error) => (lastError = err));
  const fail = (message: string): never => {
    cluster.disconnect();
    throw new StartupError(message);
  };
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      cluster.connect(),
      new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`no answer within ${connectTimeoutMs} ms`)), connectTimeoutMs))),
    ]);
  } catch (err) {
    // "Failed to refresh slots cache" carries the last node's own error, which says why.
    const last = lastError ?? (err as Error);
    const cause = (last as Error & { lastNodeError?: Error }).lastNodeError ?? last;
    if (credentialsRefused(cause.message)) fail(`Redis Cluster at ${names} refused the credentials (${cause.message}); check --redis-username-file and --redis-password-file`);
    if (/cluster support disabled/i.test(cause.message)) fail(`--store ${JSON.stringify(options.url)}: Redis at ${names} is not a cluster node; use redis:// or rediss:// for a single Redis`);
    const why = /^Connection is closed/.test(cause.message) ? "no seed node accepted a connection" : cause.message;
    fail(`cannot reach Redis Cluster at ${names}: ${why}; start it or fix --store`);
  } finally {
    clearTimeout(timer);
  }
  const strict = (options.durability ?? "strict") === "strict";
  if (strict) {
    for (const node of cluster.nodes("all")) {
      try {
        await verifyDurability(node, `node ${node.options.host}:${node.options.port}`);
      } catch (err) {
        fail((err as Error).message);
      }
    }
  }
  const replicas = options.replicas ?? 0;
  const health = new ClusterDurability(cluster, strict, { timeoutMs: durabilityCheckTimeoutMs(options.storeTimeoutMs ?? 5000), replicas });
  clusterHealth.set(cluster, health);
  guardRedisWrites(cluster, (key) => health.admit(key));
  // A primary with too few replicas starts NOT_SERVING rather than failing the start (README "Redis Cluster").
  if (replicas > 0) {
    onReplicaShortfall(cluster, () => health.recheckPrimaries());
    await health.checkAll();
  }
  return cluster;
}
