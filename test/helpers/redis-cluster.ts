import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Cluster, Redis, type RedisOptions } from "ioredis";
import { freeLowPort, waitFor } from "./wait.js";
import { waitForPong } from "./redis-server.js";
import { RedisKeys } from "../../services/storage/redis-keys.js";
import { keySlot } from "../../services/storage/redis-layout.js";

/**
 * Shell wrapper around one `redis-server`: prints its pid, ends when it ends,
 * and kills it with SIGKILL once the wrapper's stdin closes, so a test process
 * that dies without cleaning up (a crashed or killed vitest worker) leaves no
 * server behind. A background list's stdin is /dev/null, so the watcher
 * reads the wrapper's stdin through a copy of it (fd 3).
 */
const WATCHDOG = `redis-server "$@" >/dev/null 2>&1 &
pid=$!
echo "$pid"
exec 3<&0
( cat <&3 >/dev/null; kill -9 "$pid" 2>/dev/null ) &
wait "$pid"`;

/** One `redis-server` node of a {@link SpawnedCluster}. */
export interface ClusterNode {
  /** Loopback port the node listens on (its cluster bus is port + 10000). */
  readonly port: number;
  /** `127.0.0.1:<port>`, as the cluster names its nodes. */
  readonly address: string;
  /** Data directory (AOF, `nodes.conf`). */
  readonly dir: string;
  /** Process id of the running redis-server, undefined while killed. */
  readonly pid: number | undefined;
  /** True while the process runs. */
  readonly running: boolean;
  /** SIGKILLs the process (keeps its directory, so {@link restart} rejoins with the same identity). */
  kill(): Promise<void>;
  /** Starts the process (again) on the same port and directory and waits until it answers PING. */
  restart(): Promise<void>;
  /** A fresh ioredis client of this node alone (caller quits it). */
  client(): Redis;
}

/** A Redis Cluster of real `redis-server` processes owned by one test file. */
export interface SpawnedCluster {
  /** Every node, primaries first as created (roles change after a failover: ask {@link primaries}). */
  readonly nodes: readonly ClusterNode[];
  /** `redis+cluster://` URL naming every node as a seed. */
  readonly url: string;
  /** `cluster-node-timeout` in milliseconds. */
  readonly nodeTimeoutMs: number;
  /** The running nodes that are primaries now (by CLUSTER NODES as a running node sees it). */
  primaries(): Promise<ClusterNode[]>;
  /** The running node that is primary for `slot` now. */
  primaryOf(slot: number): Promise<ClusterNode>;
  /** The nodes that replicate `primary` now (running or not). */
  replicasOf(primary: ClusterNode): Promise<ClusterNode[]>;
  /**
   * Moves `slot` to primary `to` as `redis-cli --cluster reshard` does:
   * IMPORTING on the target, MIGRATING on the source, MIGRATE of the slot's
   * keys `batch` at a time (calling `between` after each batch), then
   * SETSLOT NODE on every primary.
   */
  migrateSlot(slot: number, to: ClusterNode, options?: { batch?: number; between?: () => Promise<void> }): Promise<void>;
  /**
   * Waits until every running node reports `cluster_state:ok`, every slot has
   * a running primary, every running replica's link to its primary is up,
   * and every running node's CLUSTER SLOTS lists every running node.
   */
  waitHealthy(timeoutMs?: number): Promise<void>;
  /** FLUSHALL on every primary (a fresh store for the next test). */
  flush(): Promise<void>;
  /** A fresh ioredis Cluster client (caller quits it). */
  client(): Cluster;
  /** Kills every node and removes the directories. */
  stop(): Promise<void>;
}

/** Options of {@link spawnCluster}. */
export interface ClusterOptions {
  /** Primaries (default 3). */
  primaries?: number;
  /** Replicas per primary (default 1). */
  replicas?: number;
  /** `cluster-node-timeout` in milliseconds (default 2000). */
  nodeTimeoutMs?: number;
  /** `requirepass` (and `masterauth`) of every node. */
  password?: string;
  /**
   * Serve TLS only (clients, cluster bus, replication) with these PEM files;
   * clients verify against `ca`. Nodes connect to each other with the same
   * certificate, so it must allow both uses (TestPki.peerCert).
   */
  tls?: { cert: string; key: string; ca: string };
}

/** Options of a client of one node of a cluster spawned with `options`. */
function nodeClientOptions(options: ClusterOptions): RedisOptions {
  return {
    password: options.password,
    tls: options.tls === undefined ? undefined : { ca: readFileSync(options.tls.ca) },
  };
}

function spawnNode(dir: string, port: number, options: ClusterOptions): ClusterNode {
  const nodeTimeoutMs = options.nodeTimeoutMs ?? 2000;
  const args = [
    "--port", String(port), "--bind", "127.0.0.1", "--dir", dir, "--logfile", join(dir, "redis.log"), "--protected-mode", "no", "--loglevel", "warning", "--save", "",
    "--appendonly", "yes", "--appendfsync", "always",
    "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", String(nodeTimeoutMs),
    // A replica may always take over, however long it was cut off; tests kill primaries on purpose.
    "--cluster-replica-validity-factor", "0",
    // Replicas sync at once (the default waits 5 s for more replicas to share one transfer).
    "--repl-diskless-sync-delay", "0",
  ];
  if (options.password !== undefined) args.push("--requirepass", options.password, "--masterauth", options.password);
  if (options.tls !== undefined) {
    // TLS only, the cluster bus and replication included: the plain port is closed and the TLS port takes its number.
    args.splice(args.indexOf("--port"), 2, "--port", "0", "--tls-port", String(port));
    args.push("--tls-cluster", "yes", "--tls-replication", "yes", "--tls-auth-clients", "no");
    args.push("--tls-cert-file", options.tls.cert, "--tls-key-file", options.tls.key, "--tls-ca-cert-file", options.tls.ca);
  }
  const clientOptions = nodeClientOptions(options);
  let proc: ChildProcess | undefined;
  let pid: number | undefined;
  const start = async () => {
    const child = spawn("sh", ["-c", WATCHDOG, "redis-cluster-node", ...args], { stdio: ["pipe", "pipe", "ignore"] });
    proc = child;
    pid = await new Promise<number>((resolve, reject) => {
      let out = "";
      child.stdout!.setEncoding("utf8").on("data", (c: string) => {
        out += c;
        if (out.includes("\n")) resolve(Number(out.trim()));
      });
      child.once("exit", (code) => reject(new Error(`redis-server on port ${port} exited with ${code} at start`)));
    });
    child.once("exit", () => {
      child.stdin!.end();
      if (proc === child) pid = undefined;
    });
    await waitForPong({ ...clientOptions, port, host: "127.0.0.1" }, `redis-server on port ${port} to accept connections`);
  };
  const node: ClusterNode = {
    port,
    address: `127.0.0.1:${port}`,
    dir,
    get pid() {
      return pid;
    },
    get running() {
      return pid !== undefined;
    },
    async kill() {
      const child = proc;
      if (child === undefined || child.exitCode !== null || child.signalCode !== null || pid === undefined) return;
      const exited = new Promise((r) => child.once("exit", r));
      process.kill(pid, "SIGKILL");
      await exited;
    },
    restart: start,
    client: () => new Redis({ ...clientOptions, port, host: "127.0.0.1" }),
  };
  return node;
}

/** Parsed line of CLUSTER NODES. */
interface NodeLine {
  address: string;
  flags: string[];
  primaryId: string;
  id: string;
  linkState: string;
  slots: string[];
}

function parseNodes(text: string): NodeLine[] {
  return text
    .trim()
    .split("\n")
    .map((line) => {
      const [id, addr, flags, primaryId, , , , linkState, ...slots] = line.split(" ");
      // A node that never met another does not know its own IP: it prints ":port".
      const address = addr!.split("@")[0]!.replace(/^:/, "127.0.0.1:");
      return { id: id!, address, flags: flags!.split(","), primaryId: primaryId!, linkState: linkState!, slots };
    });
}

/** One node's CLUSTER NODES reduced to roles: each node's address, primary or the address it replicates, and slots. */
function roleView(lines: NodeLine[]): string {
  const addressOf = new Map(lines.map((l) => [l.id, l.address]));
  return lines
    .map((l) => `${l.address} ${l.flags.includes("master") ? `primary ${l.slots.filter((r) => !r.startsWith("[")).join(",")}` : `of ${addressOf.get(l.primaryId) ?? "?"}`}`)
    .sort()
    .join("\n");
}

/** True when `slot` falls in one of CLUSTER NODES's slot ranges (`a-b` or `a`; migration markers skipped). */
function covers(ranges: string[], slot: number): boolean {
  return ranges.some((r) => {
    if (r.startsWith("[")) return false;
    const [a, b] = r.split("-").map(Number);
    return slot >= a! && slot <= (b ?? a)!;
  });
}

/** Runs one command on a node, on a connection of its own. */
async function command(node: ClusterNode, ...args: string[]): Promise<unknown> {
  const c = node.client();
  c.on("error", () => undefined);
  try {
    return await c.call(args[0]!, ...args.slice(1));
  } finally {
    c.disconnect();
  }
}

/**
 * Joins fresh nodes into one cluster, as `redis-cli --cluster create` does
 * but without its one-second polling: every node MEETs the first, the 16,384
 * slots are split into contiguous ranges over the primaries, and once every
 * node knows every other, each replica REPLICATEs its primary (replica i of
 * every primary is taken in turn).
 */
async function formCluster(primaries: ClusterNode[], others: ClusterNode[]): Promise<void> {
  const all = [...primaries, ...others];
  await Promise.all(all.slice(1).map((n) => command(n, "CLUSTER", "MEET", "127.0.0.1", String(all[0]!.port))));
  await Promise.all(
    primaries.map((n, i) => {
      const from = Math.floor((i * 16384) / primaries.length);
      const to = Math.floor(((i + 1) * 16384) / primaries.length) - 1;
      return command(n, "CLUSTER", "ADDSLOTSRANGE", String(from), String(to));
    }),
  );
  const ids = await Promise.all(primaries.map((n) => command(n, "CLUSTER", "MYID") as Promise<string>));
  await waitFor(async () => {
    for (const n of all) if (parseNodes((await command(n, "CLUSTER", "NODES")) as string).length !== all.length) return false;
    return true;
  }, 20_000, "every cluster node to know every other");
  await Promise.all(others.map((n, i) => command(n, "CLUSTER", "REPLICATE", ids[i % primaries.length]!)));
}

/**
 * Starts a Redis Cluster on random loopback ports in a temporary directory:
 * `primaries` primaries with `replicas` replicas each, every node
 * `appendonly yes` + `appendfsync always` (as the driver requires) and
 * `cluster-enabled yes` with a short `cluster-node-timeout`, joined as
 * `redis-cli --cluster create ... --cluster-replicas` would (see
 * {@link formCluster}), then waits until the cluster is healthy
 * ({@link SpawnedCluster.waitHealthy}).
 *
 * @throws Error when a node does not start or the cluster does not form within 30 s.
 */
export async function spawnCluster(options: ClusterOptions = {}): Promise<SpawnedCluster> {
  const primaryCount = options.primaries ?? 3;
  const replicas = options.replicas ?? 1;
  const nodeTimeoutMs = options.nodeTimeoutMs ?? 2000;
  const root = mkdtempSync(join(tmpdir(), "mecatl-cluster-"));
  const nodes: ClusterNode[] = [];
  const stop = async () => {
    await Promise.all(nodes.map((n) => n.kill()));
    rmSync(root, { recursive: true, force: true });
  };
  try {
    const ports = new Set<number>();
    // The cluster bus listens on port + 10000. Both stay below the kernel's ephemeral range
    // (a killed node is restarted on its ports, which nothing else may take meanwhile).
    while (ports.size < primaryCount * (1 + replicas)) ports.add(await freeLowPort(20000, 22767, 10000));
    for (const port of ports) {
      const dir = join(root, String(port));
      mkdirSync(dir);
      nodes.push(spawnNode(dir, port, options));
    }
    // A node not yet started starts as its restart would.
    await Promise.all(nodes.map((n) => n.restart()));
    await formCluster(nodes.slice(0, primaryCount), nodes.slice(primaryCount));
  } catch (err) {
    await stop();
    throw err;
  }

  const nodeLines = async (): Promise<NodeLine[]> => {
    for (const n of nodes.filter((x) => x.running)) {
      const c = n.client();
      c.on("error", () => undefined);
      try {
        const lines = parseNodes((await c.call("CLUSTER", "NODES")) as string);
        // A node that has not yet learned of the others is no authority.
        if (lines.length === nodes.length) return lines;
      } catch {
        // try the next node
      } finally {
        c.disconnect();
      }
    }
    throw new Error("no running node knows the whole cluster");
  };
  const byAddress = (address: string) => nodes.find((n) => n.address === address);
  const primaries = async () => {
    const lines = await nodeLines();
    return lines
      .filter((l) => l.flags.includes("master") && !l.flags.includes("fail") && l.slots.length > 0)
      .map((l) => byAddress(l.address))
      .filter((n): n is ClusterNode => n !== undefined && n.running);
  };
  const info = async (n: ClusterNode, section: string[]) => {
    const c = n.client();
    c.on("error", () => undefined);
    try {
      return await Promise.all(section.map((s) => (s === "cluster" ? c.call("CLUSTER", "INFO") : c.info(s)) as Promise<string>));
    } finally {
      c.disconnect();
    }
  };
  const waitHealthy = async (timeoutMs = 30_000) => {
    await waitFor(async () => {
      try {
        const lines = await nodeLines();
        for (let slot = 0; slot < 16384; slot += 1) {
          const owner = lines.find((l) => l.flags.includes("master") && !l.flags.some((f) => f.startsWith("fail")) && covers(l.slots, slot));
          if (owner === undefined || byAddress(owner.address)?.running !== true) return false;
          // Skip to the end of the owner's range containing this slot.
          const range = owner.slots.find((r) => !r.startsWith("[") && covers([r], slot))!;
          slot = Number(range.split("-")[1] ?? range);
        }
        // Every running node agrees on who serves and who replicates whom (a restarted primary
        // claims its old slots in its own view until it learns of its replacement).
        const views = new Set<string>();
        for (const n of nodes.filter((x) => x.running)) {
          const [cluster, replication] = await info(n, ["cluster", "replication"]);
          if (!cluster!.includes("cluster_state:ok")) return false;
          if (replication!.includes("role:slave") && !replication!.includes("master_link_status:up")) return false;
          views.add(roleView(parseNodes((await command(n, "CLUSTER", "NODES")) as string)));
        }
        if (views.size !== 1) return false;
        // Clients learn the nodes from CLUSTER SLOTS, which leaves out a replica until its
        // primary has heard (by gossip) that it synced: wait until every node lists every node.
        const running = nodes.filter((x) => x.running).map((x) => x.port);
        for (const n of nodes.filter((x) => x.running)) {
          const listed = new Set(((await command(n, "CLUSTER", "SLOTS")) as unknown[][]).flatMap((range) => range.slice(2).map((node) => Number((node as unknown[])[1]))));
          if (running.some((port) => !listed.has(port))) return false;
        }
        // With every node running, every primary has its replicas back.
        if (nodes.every((x) => x.running)) {
          const view = lines.filter((l) => !l.flags.some((f) => f.startsWith("fail")));
          const serving = view.filter((l) => l.flags.includes("master") && l.slots.length > 0);
          if (serving.length !== primaryCount) return false;
          if (serving.some((p) => view.filter((l) => l.primaryId === p.id).length !== replicas)) return false;
        }
        return true;
      } catch {
        return false;
      }
    }, timeoutMs, "the Redis cluster to be healthy");
  };
  const primaryOf = async (slot: number) => {
    const lines = await nodeLines();
    const owner = lines.find((l) => l.flags.includes("master") && !l.flags.some((f) => f.startsWith("fail")) && covers(l.slots, slot));
    const node = owner === undefined ? undefined : byAddress(owner.address);
    if (node === undefined || !node.running) throw new Error(`slot ${slot} has no running primary`);
    return node;
  };
  await waitHealthy();
  const seeds = nodes.slice(0, primaryCount).map((n) => n.address);
  return {
    nodes,
    url: `${options.tls === undefined ? "redis" : "rediss"}+cluster://${seeds.join(",")}`,
    nodeTimeoutMs,
    primaries,
    primaryOf,
    async replicasOf(primary: ClusterNode) {
      const lines = await nodeLines();
      const id = lines.find((l) => l.address === primary.address)?.id;
      return lines.filter((l) => l.primaryId === id).map((l) => byAddress(l.address)).filter((n): n is ClusterNode => n !== undefined);
    },
    async migrateSlot(slot: number, to: ClusterNode, opts: { batch?: number; between?: () => Promise<void> } = {}) {
      const from = await primaryOf(slot);
      if (from.port === to.port) return;
      const idOf = async (n: ClusterNode) => (await command(n, "CLUSTER", "MYID")) as string;
      const [fromId, toId] = [await idOf(from), await idOf(to)];
      await command(to, "CLUSTER", "SETSLOT", String(slot), "IMPORTING", fromId);
      await command(from, "CLUSTER", "SETSLOT", String(slot), "MIGRATING", toId);
      const c = from.client();
      try {
        for (;;) {
          const keys = (await c.call("CLUSTER", "GETKEYSINSLOT", String(slot), String(opts.batch ?? 100))) as string[];
          if (keys.length === 0) break;
          const auth = options.password === undefined ? [] : ["AUTH", options.password];
          await c.call("MIGRATE", "127.0.0.1", String(to.port), "", "0", "5000", ...auth, "KEYS", ...keys);
          await opts.between?.();
        }
      } finally {
        c.disconnect();
      }
      await command(to, "CLUSTER", "SETSLOT", String(slot), "NODE", toId);
      await command(from, "CLUSTER", "SETSLOT", String(slot), "NODE", toId);
      for (const n of await primaries()) if (n.port !== to.port && n.port !== from.port) await command(n, "CLUSTER", "SETSLOT", String(slot), "NODE", toId);
    },
    waitHealthy,
    async flush() {
      for (const n of await primaries()) {
        const c = n.client();
        try {
          await c.flushall();
        } finally {
          c.disconnect();
        }
      }
    },
    client: () => new Cluster(seeds.map((a) => ({ host: "127.0.0.1", port: Number(a.split(":")[1]) })), { redisOptions: nodeClientOptions(options) }),
    stop,
  };
}

/**
 * A session id (starting with `hint`) whose keys, under the default key
 * prefix and partition count, live on a slot `node` is primary for now.
 */
export async function sessionIdOn(cluster: SpawnedCluster, node: ClusterNode, hint: string): Promise<string> {
  const keys = new RedisKeys("mecatl-drivers:");
  for (let i = 0; ; i++) {
    const id = `${hint}-${i}`;
    if ((await cluster.primaryOf(keySlot(keys.snapshot(id)))).port === node.port) return id;
  }
}
