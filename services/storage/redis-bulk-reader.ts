import { isCluster, type RedisClient } from "./redis-client.js";

/** The bulk reader of each command client, once opened. */
const readers = new WeakMap<RedisClient, Promise<RedisClient>>();

/**
 * A connection of its own (an ioredis `duplicate` of `client`: same server
 * or cluster, credentials, TLS and timeouts) for reads whose replies are
 * large: the chunks of a snapshot payload, up to 64 MiB. Redis answers a
 * connection's commands in order, so on the shared command connection every
 * small call's reply queued behind such a reply until all of it had arrived
 * and been parsed: a Renew sent just after a 64 MiB Load was answered
 * 100–250 ms later (issue 11, "big snapshots that don't stall small calls").
 *
 * Opened on first use (a server that never loads a large payload never opens
 * it) and resolved once it is ready; closed with `client` by {@link closeRedisClient}. Its
 * connection errors are left to the commands sent on it, which fail as any
 * read does (RedisOperation: retried, then UNAVAILABLE).
 *
 * @throws Error (rejects) when it cannot connect; the next call tries again.
 */
export function bulkReader(client: RedisClient): Promise<RedisClient> {
  const reader = readers.get(client);
  if (reader !== undefined) return reader;
  const dup: RedisClient = isCluster(client) ? client.duplicate() : client.duplicate();
  // Failures surface through the commands sent on it; without a listener ioredis would print each one to stderr.
  dup.on("error", () => undefined);
  const opened = dup.connect().then(
    () => dup,
    (err: unknown) => {
      readers.delete(client);
      dup.disconnect();
      throw err;
    },
  );
  readers.set(client, opened);
  return opened;
}

/** Closes `client` and its bulk reader, if one was opened: QUIT (after the replies in flight), or a disconnect when QUIT fails. */
export async function closeRedisClient(client: RedisClient): Promise<void> {
  const reader = readers.get(client);
  readers.delete(client);
  const quit = (c: RedisClient) => c.quit().then(
    () => undefined,
    () => c.disconnect(),
  );
  const dup = await reader?.catch(() => undefined);
  await Promise.all([quit(client), dup === undefined ? undefined : quit(dup)]);
}
