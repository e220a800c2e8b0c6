import { statSync } from "node:fs";
import { connectedPrimaries, isCluster, type RedisClient } from "../storage/redis-client.js";
import { StartupError } from "../storage/redis-connection.js";

/**
 * What a store physically is, whatever text named it (issue 14: `copy
 * --replace` must never erase its own source):
 *
 * - an SQLite file: its device and inode (the same through `./`, `..`, a
 *   symbolic link or a hard link);
 * - a Redis store: the servers holding it (`run:<run_id>` of a single
 *   Redis, from INFO server: random at every start of the process and the
 *   same through any address or name of it; `node:<id>` of every node of a
 *   Redis Cluster, from CLUSTER NODES: the same through any seed node), the
 *   database (always 0 on a cluster) and the base of its keys
 *   (`<prefix>v2:`).
 */
export type StoreIdentity =
  | { backend: "sqlite"; dev: bigint; ino: bigint }
  | { backend: "redis"; servers: string[]; db: number; base: string };

/**
 * The identity of the SQLite file at `path`, or undefined when there is no
 * file there (it then cannot be any other store).
 *
 * @throws Error from stat for anything but a missing file.
 */
export function sqliteIdentity(path: string): StoreIdentity | undefined {
  const st = statSync(path, { bigint: true, throwIfNoEntry: false });
  return st === undefined ? undefined : { backend: "sqlite", dev: st.dev, ino: st.ino };
}

/**
 * The identity of the Redis store with key base `base` that `client` reaches.
 *
 * @throws StartupError when the server does not say who it is (INFO or
 *   CLUSTER NODES refused, e.g. by an ACL): `copy` cannot then rule out that
 *   both sides are one store.
 */
export async function redisIdentity(client: RedisClient, base: string): Promise<StoreIdentity> {
  try {
    if (isCluster(client)) {
      const [node] = await connectedPrimaries(client);
      const nodes = String(await node!.call("CLUSTER", "NODES"));
      const ids = nodes.split("\n").map((line) => line.split(" ")[0]!).filter((id) => id.length > 0);
      return { backend: "redis", servers: ids.map((id) => `node:${id}`), db: 0, base };
    }
    const runId = /^run_id:(\w+)/m.exec(await client.info("server"))?.[1];
    if (runId === undefined) throw new Error("INFO server has no run_id");
    return { backend: "redis", servers: [`run:${runId}`], db: client.options.db ?? 0, base };
  } catch (err) {
    throw new StartupError(`cannot tell which Redis server --store is (${(err as Error).message}); allow INFO (and CLUSTER NODES on a cluster) for this user, so that copy can make sure --from and --to are not one store`);
  }
}

/**
 * Why stores `a` and `b` share records, or undefined when they are apart:
 * one SQLite file, or Redis stores on a common server (any common cluster
 * node) in the same database whose key bases are equal or one is the start
 * of the other (`p:v2:` and `p:v2:x:v2:`: the first one's SCAN patterns and
 * erase reach into the second). Prefixes such as `a:` and `a:b:` are apart
 * (bases `a:v2:` and `a:b:v2:`). An SQLite file and a Redis store are always apart.
 */
export function sharedStore(a: StoreIdentity, b: StoreIdentity): string | undefined {
  if (a.backend === "sqlite" && b.backend === "sqlite") {
    return a.dev === b.dev && a.ino === b.ino ? `both are the SQLite file with device ${a.dev} and inode ${a.ino}` : undefined;
  }
  if (a.backend !== "redis" || b.backend !== "redis") return undefined;
  const common = a.servers.find((s) => b.servers.includes(s));
  if (common === undefined || a.db !== b.db) return undefined;
  const server = common.startsWith("node:") ? `Redis Cluster node ${common.slice(5)}` : `Redis server run_id ${common.slice(4)}, database ${a.db}`;
  if (a.base === b.base) return `both are keys ${JSON.stringify(a.base)}... of the ${server}`;
  if (a.base.startsWith(b.base) || b.base.startsWith(a.base)) return `keys ${JSON.stringify(a.base)}... and ${JSON.stringify(b.base)}... of the ${server} overlap (one key prefix + "v2:" starts the other)`;
  return undefined;
}
