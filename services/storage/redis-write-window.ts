import type { RedisClient } from "./redis-client.js";
import { GroupCommitLimit } from "./group-commit-limit.js";
import { nodeGroupOf } from "./redis-script.js";

/**
 * Thrown by a write attempt that waited in its connection's
 * {@link RedisWriteWindow} for all the time its operation had left, or got
 * its place with too little left: it was never sent, so nothing of it was
 * applied. The operation ends `StoreFailure("unreachable")`, UNAVAILABLE
 * "... (earlier writes to Redis were not answered); nothing was written"
 * (redis-errors.ts; README "Failures").
 */
export class RedisWindowTimeout extends Error {
  override name = "RedisWindowTimeout";
}

/** A write attempt waiting for a place in the window. */
interface Waiter {
  admit(): void;
}

/**
 * The recorded writes one Redis connection (on a cluster: one node) has sent
 * and not yet seen answered (an attempt the operation stopped waiting for
 * still counts until Redis answers it or the connection fails), bounded by an adaptive limit (issue 11; the rule is
 * {@link GroupCommitLimit}'s, group-commit-limit.ts).
 *
 * With `appendfsync always` Redis syncs once per turn of its event loop for
 * every command it read in that turn, and answers them together: a group
 * commit. Sending every write at once makes the calls in flight travel as
 * one convoy, as the SQLite writer's unbounded groups did: 64 answers come
 * back together, the server sends them, the client sends 64 new calls, and
 * Redis waits meanwhile. Holding writes beyond the limit in the server
 * until earlier ones are answered lets Redis commit a group while the
 * answers of the one before travel back (Renew at 64 in flight went from
 * 0.73 to 0.86 of the transport floor, Append from 0.68 to 0.81;
 * bench/RESULTS.md). The limit is adapted each
 * time as many writes were answered as it allows, or when none is left in
 * flight: it doubles while a whole group's worth waits here, halves when
 * nothing does.
 *
 * Waiting counts in the operation's `--store-timeout`; a write that could
 * not be sent in that time, or got its place with less time left than a
 * retry needs, fails with {@link RedisWindowTimeout} (not sent, so
 * `unreachable`, nothing written). While Redis stalls, then, at most the
 * limit's worth of writes is sent into it. Reads and the writes that wait for
 * replicas (`--redis-wait-replicas`, grouped per pipeline instead) do not
 * pass through it.
 */
export class RedisWriteWindow {
  private readonly limit = new GroupCommitLimit();
  private inFlight = 0;
  /** Writes answered since the limit was last adapted. */
  private answered = 0;
  private readonly waiting: Waiter[] = [];

  /**
   * Takes a place for one write attempt. Returns undefined when it may be
   * sent at once; else a promise that resolves when it may, or rejects with
   * {@link RedisWindowTimeout} after `waitMs` milliseconds (the place is then
   * not taken). Every place taken must be given back with {@link leave}.
   */
  enter(waitMs: number): Promise<void> | undefined {
    if (this.inFlight < this.limit.size && this.waiting.length === 0) {
      this.inFlight++;
      return undefined;
    }
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        admit: () => {
          clearTimeout(timer);
          this.inFlight++;
          resolve();
        },
      };
      const timer = setTimeout(() => {
        this.waiting.splice(this.waiting.indexOf(waiter), 1);
        reject(new RedisWindowTimeout(`the write waited ${Math.round(waitMs)} ms behind earlier writes to Redis and was not sent`));
      }, waitMs);
      this.waiting.push(waiter);
    });
  }

  /** Gives back the place of a write whose command Redis answered (or whose connection failed), or that was not sent after all; admits waiting writes. */
  leave(): void {
    this.inFlight--;
    if (++this.answered >= this.limit.size || this.inFlight === 0) {
      this.answered = 0;
      this.limit.adapt(this.waiting.length);
    }
    while (this.inFlight < this.limit.size && this.waiting.length > 0) this.waiting.shift()!.admit();
  }
}

const windows = new WeakMap<RedisClient, Map<string, RedisWriteWindow>>();

/**
 * The write window for a write to `key` on `redis`, made on first use: one
 * per connection to a single Redis; on a cluster, one per node serving the
 * key's slot ({@link nodeGroupOf}), so that writes stuck on a stalled
 * primary never hold up the writes to the others.
 */
export function writeWindow(redis: RedisClient, key: string | undefined): RedisWriteWindow {
  let byNode = windows.get(redis);
  if (byNode === undefined) windows.set(redis, (byNode = new Map()));
  const node = nodeGroupOf(redis, key);
  let w = byNode.get(node);
  if (w === undefined) byNode.set(node, (w = new RedisWriteWindow()));
  return w;
}
