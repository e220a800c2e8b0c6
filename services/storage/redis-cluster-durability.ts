import { EventEmitter } from "node:events";
import type { Cluster, Redis } from "ioredis";
import { DurabilityWatch, type DurabilityCheckOutcome, type DurabilityWatchOptions } from "./redis-durability-watch.js";
import { reconnectCause, trackReconnectCause } from "./redis-reconnect-cause.js";
import { CLUSTER_SLOTS, keySlot } from "./redis-layout.js";
import { StoreFailure } from "./store-failure.js";

/**
 * A write refused before it was sent because its slot has no connected
 * primary now: a passing condition (a failover, a reconnect) that
 * redis-operation.ts retries until --store-timeout, then reports as
 * "nothing was written".
 */
export class SlotUnserved extends Error {
  override name = "SlotUnserved";
}

/** `host:port` of a node connection, as the cluster client's slot map names nodes. */
function nodeKey(node: Redis): string {
  return `${node.options.host}:${node.options.port}`;
}

/**
 * What a Redis Cluster store's health and write guard need to know, per
 * node (issue 13, deliverable 3):
 *
 * - every node the client knows (primaries and replicas: a replica becomes
 *   the primary of its slots on failover, and is then already checked) has
 *   a {@link DurabilityWatch} in strict mode, and with
 *   `--redis-wait-replicas N` (`options.replicas`, the writer client), where
 *   it also counts the node's replicas in sync while it is a primary (a
 *   replica just promoted, or a primary short of replicas, is checked again at
 *   every slot map refresh, without waiting for the next periodic check): checked when its connection
 *   comes up, after every reconnect, and every few seconds. Nodes the client
 *   discovers later (`+node`, after a failover, a slot migration, a node
 *   added) are watched at once; nodes it drops (`-node`) are forgotten;
 * - a write is admitted ({@link admit}) only when the primary of its key's
 *   slot is connected and, in strict mode, found durable since it last
 *   connected; it waits for a check in progress, like a single Redis's;
 * - {@link problem} is undefined only while the client is ready, every slot
 *   has a primary with a live connection, and (strict) every such primary is
 *   verified durable (and has enough replicas): health is NOT_SERVING
 *   otherwise. A primary that cannot be reconnected because it refuses the
 *   credentials is named with that cause (redis-reconnect-cause.ts).
 *
 * - no node connection queues a command while it is not connected (see
 *   {@link add}): a command is sent now or refused, never held past its
 *   operation's deadline.
 *
 * Emits `change` whenever any of that may have changed, and `checked` with
 * the outcome of each node's durability check (DurabilityWatch).
 */
export class ClusterDurability extends EventEmitter {
  private readonly watches = new Map<Redis, DurabilityWatch>();

  /**
   * @param cluster the store's cluster client.
   * @param strict true with `--redis-durability strict`: nodes are watched for durability.
   * @param options timing of the watches, and `replicas` (`--redis-wait-replicas`, the writer client): nodes are watched for replicas too.
   */
  constructor(
    private readonly cluster: Cluster,
    private readonly strict: boolean,
    private readonly options: DurabilityWatchOptions = {},
  ) {
    super();
    this.setMaxListeners(0);
    const changed = () => this.emit("change");
    for (const e of ["ready", "close", "end", "reconnecting", "refresh", "error"]) cluster.on(e, changed);
    trackReconnectCause(cluster, changed);
    // At every slot map refresh (every second), primaries whose last check saw them as a replica (promoted
    // by a failover), that have not read their role yet, or that found a problem are checked again, so one
    // that gets its replicas back serves again within about a second, not a check period.
    if ((options.replicas ?? 0) > 0) cluster.on("refresh", () => this.recheckPrimaries((w) => w.role !== "master" || w.problem !== undefined));
    cluster.on("+node", (node: Redis) => {
      this.add(node);
      changed();
    });
    cluster.on("-node", (node: Redis) => {
      this.watches.delete(node);
      changed();
    });
    for (const node of cluster.nodes("all")) this.add(node);
  }

  private add(node: Redis): void {
    if (this.watches.has(node)) return;
    // ioredis gives every node connection an offline queue, so that a command for a
    // node still connecting waits for it. Such a command can then run long after its
    // operation gave up and answered (a write then applied after the caller, told the
    // outcome is unknown, read the store and sent it again): refuse it at once instead,
    // as on a single Redis (certainly not sent; redis-operation.ts retries it).
    node.options.enableOfflineQueue = false;
    const changed = () => this.emit("change");
    node.on("ready", changed);
    node.on("close", changed);
    trackReconnectCause(node, changed);
    if (this.watched) {
      const watch = new DurabilityWatch(node, { ...this.options, durability: this.strict });
      watch.on("change", changed);
      watch.on("checked", (outcome: DurabilityCheckOutcome) => this.emit("checked", outcome));
      this.watches.set(node, watch);
    }
    // Node connections open on their first command; the watch's check is one, and a
    // primary without traffic must still be seen to be up.
    if (node.status === "wait") node.connect().catch(() => undefined);
  }

  /** True when nodes get a {@link DurabilityWatch}: strict mode, or replicas to count. */
  private get watched(): boolean {
    return this.strict || (this.options.replicas ?? 0) > 0;
  }

  /**
   * Starts a check now of every primary (those `only` accepts, when given),
   * unless one is running (DurabilityWatch.recheck): a write fell short of
   * replicas, or the slot map was refreshed.
   */
  recheckPrimaries(only: (watch: DurabilityWatch) => boolean = () => true): void {
    for (const node of this.cluster.nodes("master")) {
      const watch = this.watches.get(node);
      if (watch !== undefined && only(watch)) watch.recheck();
    }
  }

  /** Runs a check of every node now and resolves when all have answered or reached their time limit (at start). */
  async checkAll(): Promise<void> {
    await Promise.all([...this.watches.values()].map((w) => w.check()));
  }

  /** `: <cause>` when `node` (or the cluster client) cannot reconnect for a known reason, else empty. */
  private because(node: object): string {
    const cause = reconnectCause(node) ?? reconnectCause(this.cluster);
    return cause === undefined ? "" : `: ${cause}`;
  }

  /** The connection to the primary the client routes slot `slot` to now, or undefined. */
  primaryFor(slot: number): Redis | undefined {
    const key = this.cluster.slots[slot]?.[0];
    if (key === undefined) return undefined;
    return this.cluster.nodes("master").find((n) => nodeKey(n) === key);
  }

  /**
   * The write guard of a cluster store (redis-script.ts guardRedisWrites):
   * refuses a write to `key` (nothing sent) when its slot has no connected
   * primary ({@link SlotUnserved}, retried; naming the credentials refused
   * when that is why it cannot reconnect) or, in strict mode, the primary
   * is not durable, or it has fewer replicas in sync than
   * `--redis-wait-replicas` (StoreFailure `not_durable`, nothing sent); waits while the primary is being checked again after a
   * reconnect (see DurabilityWatch.admit).
   *
   * @throws SlotUnserved, or StoreFailure `not_durable`.
   */
  admit(key: string | undefined): void | Promise<void> {
    if (key === undefined) return undefined;
    const slot = keySlot(key);
    const primary = this.primaryFor(slot);
    if (primary === undefined) throw new SlotUnserved(`no primary of the Redis Cluster serves slot ${slot} now (failover or reconfiguration)${this.because(this.cluster)}`);
    if (primary.status !== "ready") throw new SlotUnserved(`the Redis Cluster primary ${nodeKey(primary)} of slot ${slot} is not connected${this.because(primary)}`);
    const watch = this.watches.get(primary);
    if (watch !== undefined) return watch.admit();
    if (this.watched) throw new StoreFailure("not_durable", `the primary ${nodeKey(primary)} of slot ${slot} is not checked for durability yet; the write was refused and nothing was written`);
    return undefined;
  }

  /** Why the store cannot take every write now (one sentence, stable while it lasts), or undefined. */
  problem(): string | undefined {
    if (this.cluster.status !== "ready") return `Redis Cluster connection lost; reconnecting${this.because(this.cluster)}`;
    for (let slot = 0; slot < CLUSTER_SLOTS; ) {
      const key = this.cluster.slots[slot]?.[0];
      let end = slot + 1;
      while (end < CLUSTER_SLOTS && this.cluster.slots[end]?.[0] === key) end++;
      const range = end - slot === 1 ? `slot ${slot}` : `slots ${slot}-${end - 1}`;
      if (key === undefined) return `no primary of the Redis Cluster serves ${range}${this.because(this.cluster)}`;
      const primary = this.primaryFor(slot);
      if (primary === undefined || primary.status !== "ready") return `the Redis Cluster primary ${key} of ${range} is unreachable${primary === undefined ? "" : this.because(primary)}`;
      const watch = this.watches.get(primary);
      if (this.watched && watch === undefined) return `the Redis Cluster primary ${key} of ${range} is not checked for durability yet`;
      if (watch !== undefined) {
        if (watch.problem !== undefined) return `${watch.problem} (primary ${key} of ${range})`;
        if (!watch.verified) return `the Redis Cluster primary ${key} of ${range} reconnected and is being checked for durability again`;
      }
      slot = end;
    }
    return undefined;
  }
}
