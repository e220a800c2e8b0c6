import type { Cluster, Redis } from "ioredis";
import { isCluster, type RedisClient } from "../storage/redis-client.js";
import type { RedisKeys } from "../storage/redis-keys.js";
import { keySlot } from "../storage/redis-layout.js";
import { classifyRedisError, withinMs } from "../storage/redis-errors.js";
import { StoreFailure } from "../storage/store-failure.js";
import type { ChangeFeed, ChangeHint } from "./store.js";

interface Watch {
  sessionId: string;
  refs: number;
  subscribed: Promise<unknown>;
}

/**
 * The Redis change feed: ONE subscriber connection per process (on a
 * cluster, one per primary), opened when the first follower arrives,
 * whatever the number of followers. Every append
 * script PUBLISHes `<generation>:<length>` on the session's change channel and
 * the session delete script publishes an empty message; this connection
 * SUBSCRIBEs to the channels of the sessions followed in this process (one
 * subscription per session, shared by its followers) and unsubscribes when
 * the last follower leaves.
 *
 * Why Pub/Sub rather than blocking XREADs: an XREAD BLOCK occupies its
 * connection, so serving many followers would need one connection per
 * follower (forbidden) or a loop that re-issues one XREAD over every followed
 * stream on each wake-up. Pub/Sub costs one connection and nothing while idle.
 * It is lossy across a reconnect, so the log stays the source of truth:
 * messages are only wake-up hints, followers re-read the stream through the
 * shared command connection, and after the subscriber reconnects every
 * follower is woken to re-check.
 */
export class RedisChangeFeed implements ChangeFeed {
  private sub: RedisClient | undefined;
  private readonly watches = new Map<string, Watch>();
  private change: (sessionId: string, hint: ChangeHint) => void = () => undefined;
  private changeAll: () => void = () => undefined;

  /**
   * @param redis the store's command connection, duplicated for the subscriber.
   * @param keys the store's key names (the change channels).
   * @param timeoutMs `--store-timeout` in milliseconds: how long {@link watch} waits for Redis to confirm a subscription.
   */
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: RedisKeys,
    private readonly timeoutMs: number,
  ) {}

  listen(change: (sessionId: string, hint: ChangeHint) => void, changeAll: () => void): void {
    this.change = change;
    this.changeAll = changeAll;
  }

  /**
   * Subscribes to `sessionId`'s change channel (shared by its followers) and
   * resolves once Redis confirmed the subscription.
   *
   * @throws StoreFailure `unreachable` (UNAVAILABLE; wire-contract.md section
   *   3.6, a follow ends with a status) when Redis does not confirm it within
   *   `--store-timeout` or the subscriber connection fails meanwhile: a
   *   SUBSCRIBE lost with a stalled or dropped connection may never be
   *   answered, and the follow must not wait for it holding its slot.
   *   The limit runs from the SUBSCRIBE, so a follower that joins one
   *   already sent waits only for what is left of it.
   */
  async watch(sessionId: string): Promise<void> {
    const channel = this.keys.eventLogChannel(sessionId);
    let w = this.watches.get(channel);
    if (w === undefined) {
      const sub = this.subscriber();
      // Bounded from when the SUBSCRIBE is sent, for every follower that joins it: when it
      // fails, they all fail in the same turn, their unwatch drops the entry, and the next
      // follower sends a SUBSCRIBE of its own (one left unanswered is never retried).
      w = { sessionId, refs: 0, subscribed: withinMs(isCluster(sub) ? sub.ssubscribe(channel) : sub.subscribe(channel), this.timeoutMs) };
      w.subscribed.catch(() => undefined);
      this.watches.set(channel, w);
    }
    w.refs++;
    try {
      await w.subscribed;
    } catch (err) {
      this.unwatch(sessionId);
      const c = classifyRedisError(err);
      const cause = c.kind === "retry" ? c.cause : (err as Error).message;
      throw new StoreFailure("unreachable", `Redis did not confirm the follow's subscription within ${this.timeoutMs} ms (${cause}); follow again`, { cause: err });
    }
  }

  unwatch(sessionId: string): void {
    const channel = this.keys.eventLogChannel(sessionId);
    const w = this.watches.get(channel);
    if (w === undefined || --w.refs > 0) return;
    this.watches.delete(channel);
    const sub = this.sub;
    if (sub !== undefined) (isCluster(sub) ? sub.sunsubscribe(channel) : sub.unsubscribe(channel)).catch(() => undefined);
  }

  close(): void {
    this.sub?.disconnect();
    this.sub = undefined;
    this.watches.clear();
  }

  private subscriber(): RedisClient {
    if (this.sub !== undefined) return this.sub;
    const sub = isCluster(this.redis) ? this.clusterSubscriber(this.redis) : this.redisSubscriber(this.redis);
    this.sub = sub;
    return sub;
  }

  /** The single-Redis subscriber: one connection, re-reads every followed log once it is subscribed again after a reconnect. */
  private redisSubscriber(redis: Redis): Redis {
    // Unlike the command connection (storage/redis-connection.ts), the subscriber
    // queues its SUBSCRIBEs until it is connected: they are idempotent.
    const sub = redis.duplicate({ enableAutoPipelining: false, enableOfflineQueue: true, maxRetriesPerRequest: 1 });
    sub.on("error", () => undefined); // reconnects are handled below; health watches the main connection
    sub.on("message", (channel: string, message: string) => this.deliver(channel, message));
    let readies = 0;
    sub.on("ready", () => {
      if (readies++ === 0) return;
      // ioredis re-subscribes right after this event; a PING queued behind
      // those SUBSCRIBEs answers once they are in force, and only then can a
      // re-read be sure not to miss a message that was lost while down.
      setImmediate(() => {
        sub.ping().then(
          () => this.changeAll(),
          () => undefined,
        );
      });
    });
    return sub;
  }

  /**
   * The cluster subscriber (issue 13): sharded Pub/Sub, one connection per
   * primary (ioredis `shardedSubscribers`), each SSUBSCRIBEd to the channels
   * of the followed sessions whose slots it holds; the append and delete
   * scripts SPUBLISH on the same slot. After a topology change (failover,
   * slot migration) ioredis connects to the new primaries and subscribes
   * again (`subscribersReady`); every follower is then woken to re-read.
   */
  private clusterSubscriber(cluster: Cluster): Cluster {
    const sub = cluster.duplicate([], { enableAutoPipelining: false, enableOfflineQueue: true, shardedSubscribers: true });
    sub.on("error", () => undefined);
    sub.on("smessage", (channel: string, message: string) => this.deliver(channel, message));
    sub.on("subscribersReady", () => void this.afterResubscribe(sub));
    return sub;
  }

  /**
   * Wakes every follower once the subscriptions ioredis renewed after a
   * topology change are in force: it sends them without waiting, so one
   * SSUBSCRIBE more per slot followed (of a probe channel on that slot, then
   * dropped) is answered only after them, on the same connection. A
   * follower then re-reads its log and misses nothing published meanwhile.
   */
  private async afterResubscribe(sub: Cluster): Promise<void> {
    const probes = new Map<number, string>();
    for (const channel of this.watches.keys()) probes.set(keySlot(channel), `${channel}:probe`);
    await Promise.all(
      [...probes.values()].map((probe) =>
        sub.ssubscribe(probe).then(
          () => sub.sunsubscribe(probe),
          () => undefined,
        ),
      ),
    ).catch(() => undefined);
    this.changeAll();
  }

  private deliver(channel: string, message: string): void {
    const w = this.watches.get(channel);
    if (w !== undefined) this.change(w.sessionId, parseHint(message));
  }
}

/** Parses `<generation>:<length>`; empty means the session was deleted; anything else is a bare wake-up. */
function parseHint(message: string): ChangeHint {
  if (message === "") return { generation: null, length: 0 };
  const at = message.indexOf(":");
  const length = Number(message.slice(at + 1));
  if (at < 0 || !Number.isSafeInteger(length)) return undefined;
  return { generation: message.slice(0, at), length };
}
