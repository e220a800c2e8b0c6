import { Cluster, type Redis } from "ioredis";
import { connectRedis, type RedisConnectOptions } from "./redis-connection.js";
import { connectRedisCluster, isClusterUrl } from "./redis-cluster.js";

/**
 * The command client of a Redis store: one connection to a single Redis
 * (`redis://`, `rediss://`), or an ioredis {@link Cluster} that routes each
 * command to the primary of its key's hash slot (`redis+cluster://`,
 * `rediss+cluster://`, issue 13). Both take the same commands and scripts;
 * every script of this project touches keys of one slot only, so it runs
 * unchanged on either.
 */
export type RedisClient = Redis | Cluster;

/** True when `client` is a Redis Cluster client. */
export function isCluster(client: RedisClient): client is Cluster {
  return client instanceof Cluster;
}

/**
 * The node connections that hold data: the single connection itself, or
 * every primary of the cluster as the client knows the topology now (each an
 * ioredis connection of its own, created and dropped by the cluster client).
 */
export function primaryConnections(client: RedisClient): Redis[] {
  return isCluster(client) ? client.nodes("master") : [client];
}

/**
 * {@link primaryConnections}, each connected: a cluster opens its node
 * connections on first use and queues nothing meanwhile
 * (redis-cluster-durability.ts), so a command sent straight to a node waits
 * for this first.
 *
 * @throws Error when a node connection fails to open.
 */
export async function connectedPrimaries(client: RedisClient): Promise<Redis[]> {
  const nodes = primaryConnections(client);
  await Promise.all(
    nodes.map(async (node) => {
      if (node.status === "ready") return;
      const ready = new Promise<void>((resolve, reject) => {
        node.once("ready", resolve);
        node.once("end", () => reject(new Error(`the connection to ${node.options.host}:${node.options.port} ended before it was ready`)));
      });
      if (node.status === "wait") node.connect().catch(() => undefined);
      await ready;
    }),
  );
  return nodes;
}

/**
 * The command a script announces a change with (event-log channels): PUBLISH
 * on a single Redis; SPUBLISH (sharded Pub/Sub, Redis 7) on a cluster, so
 * the message stays on the shard that holds the channel's slot instead of
 * crossing the cluster bus to every node (issue 13).
 */
export function publishCommand(client: RedisClient): "PUBLISH" | "SPUBLISH" {
  return isCluster(client) ? "SPUBLISH" : "PUBLISH";
}

/**
 * Connects to the Redis store `options.url` names: {@link connectRedis} for
 * `redis://` and `rediss://`, {@link connectRedisCluster} for
 * `redis+cluster://` and `rediss+cluster://`.
 *
 * @throws StartupError as those do.
 */
export function connectRedisClient(options: RedisConnectOptions): Promise<RedisClient> {
  return isClusterUrl(options.url) ? connectRedisCluster(options) : connectRedis(options);
}

/** True when `store` names a Redis store of either kind (the `--store` schemes this module connects to). */
export function isRedisStoreUrl(store: string): boolean {
  return /^rediss?(\+cluster)?:\/\//.test(store);
}
