import { EventEmitter } from "node:events";
import { isCluster, type RedisClient } from "./redis-client.js";
import { withinMs, writeRefusalCause } from "./redis-errors.js";
import type { RedisKeys } from "./redis-keys.js";
import { hashTag, keySlot } from "./redis-layout.js";

/** Milliseconds between two probe writes while Redis refuses writes (1 s), as SQLite's disk probe (sqlite-database.ts). */
export const REFUSAL_PROBE_INTERVAL_MS = 1000;

/** Milliseconds a probe key lives (1 s): it is written to see whether a write can succeed, never read. */
export const PROBE_TTL_MS = 1000;

/** One node (a single Redis, or a cluster primary) seen refusing writes. */
interface Refusal {
  /** Hash tag of the refused write's key: the probe writes to the same slot. */
  tag: string;
  /** Why, as {@link writeRefusalCause} says (e.g. `maxmemory reached (OOM)`). */
  cause: string;
  /** True while a probe write of this node is in flight. */
  probing: boolean;
  /** Counts the refusals noted for this node: a probe clears the entry only if none was noted since it started. */
  noted: number;
}

/**
 * Health while Redis refuses writes by an error reply (issue 9, "health turns
 * NOT_SERVING while writes cannot succeed and back when they can"): OOM
 * (maxmemory reached), MISCONF (it cannot persist: a failed background save,
 * an AOF write error such as a full disk), READONLY (the node became a
 * replica), NOREPLICAS (`min-replicas-to-write` not met). Each such reply a
 * write got is {@link note}d; the node that gave it is then refused (its
 * {@link problem} makes health NOT_SERVING, backend.ts) until a probe write
 * succeeds: every {@link REFUSAL_PROBE_INTERVAL_MS} ms, `SET
 * <RedisKeys.probe(tag)> 1 PX` {@link PROBE_TTL_MS}, with the hash tag of the
 * refused write, so on a Redis Cluster the probe goes to the slot, and so the
 * primary, that refused (one entry per primary). Redis judges the probe as
 * it judges every write (the same OOM, MISCONF, READONLY and NOREPLICAS
 * checks come before any command runs), so its success means writes can
 * succeed again. A probe that gets no answer within the interval (or the
 * store timeout, if shorter) counts as failed; probes never wait for each
 * other, nor does any call wait for a probe. Emits `change` whenever
 * {@link problem} may have changed.
 */
export class WriteRefusals extends EventEmitter {
  /** Refusing nodes by name: `""` on a single Redis, the primary's `host:port` on a cluster (as the slot map names it). */
  private readonly refused = new Map<string, Refusal>();
  private timer: NodeJS.Timeout | undefined;
  private ended = false;

  /**
   * @param client the store's command client, which probes go through.
   * @param keys the store's key layout ({@link RedisKeys.probe}).
   * @param timeoutMs `--store-timeout` in milliseconds: no probe waits longer (nor longer than the interval).
   * @param intervalMs milliseconds between two probes of a refusing node.
   */
  constructor(
    private readonly client: RedisClient,
    private readonly keys: RedisKeys,
    private readonly timeoutMs: number,
    private readonly intervalMs = REFUSAL_PROBE_INTERVAL_MS,
  ) {
    super();
    client.once("end", () => {
      this.ended = true;
      clearInterval(this.timer);
    });
  }

  /**
   * Takes note of `err`, the error of one attempt of a write to `key`: when
   * it is a write refusal ({@link writeRefusalCause}), the node of `key`'s
   * slot counts as refusing writes from now on, until a probe succeeds.
   * Anything else is ignored.
   */
  note(err: unknown, key: string | undefined): void {
    const cause = writeRefusalCause(err);
    if (cause === undefined || this.ended) return;
    const tag = key === undefined ? undefined : hashTag(key);
    if (tag === undefined) return;
    const node = isCluster(this.client) ? (this.client.slots[keySlot(key!)]?.[0] ?? "(unknown)") : "";
    const known = this.refused.get(node);
    if (known !== undefined) {
      known.noted++;
      if (known.cause === cause) return;
      known.cause = cause;
    } else {
      this.refused.set(node, { tag, cause, probing: false, noted: 0 });
    }
    this.timer ??= setInterval(() => this.probeAll(), this.intervalMs);
    this.timer.unref();
    this.emit("change");
  }

  /**
   * Why writes cannot succeed, from the first refusing node, or undefined:
   * e.g. `Redis refuses writes: maxmemory reached (OOM); writes fail until a
   * probe write succeeds (one every 1000 ms)`. Stable while the cause lasts.
   */
  get problem(): string | undefined {
    for (const [node, r] of this.refused) {
      const who = node === "" ? "Redis refuses writes" : `the Redis Cluster primary ${node} refuses writes`;
      return `${who}: ${r.cause}; writes fail until a probe write succeeds (one every ${this.intervalMs} ms)`;
    }
    return undefined;
  }

  private probeAll(): void {
    for (const [node, r] of this.refused) if (!r.probing) void this.probe(node, r);
  }

  /** One probe write of `node`: clears its refusal on success, takes its new cause on another refusal, keeps it otherwise. */
  private async probe(node: string, r: Refusal): Promise<void> {
    r.probing = true;
    const noted = r.noted;
    try {
      await withinMs(this.client.set(this.keys.probe(r.tag), "1", "PX", PROBE_TTL_MS), Math.min(this.intervalMs, this.timeoutMs));
      // A refusal noted meanwhile may have been answered after this probe: it stands.
      if (r.noted !== noted) return;
      this.refused.delete(node);
      if (this.refused.size === 0) {
        clearInterval(this.timer);
        this.timer = undefined;
      }
      this.emit("change");
    } catch (err) {
      // Another refusal (say OOM, then READONLY) replaces the cause; a lost connection or no answer in time keeps it.
      const cause = writeRefusalCause(err);
      if (cause !== undefined && cause !== r.cause) {
        r.cause = cause;
        this.emit("change");
      }
    } finally {
      r.probing = false;
    }
  }
}

const trackers = new WeakMap<RedisClient, WriteRefusals>();

/** Puts a {@link WriteRefusals} on the store's command client (backend.ts, once its key layout is open) and returns it. */
export function trackWriteRefusals(client: RedisClient, keys: RedisKeys, timeoutMs: number): WriteRefusals {
  const tracker = new WriteRefusals(client, keys, timeoutMs);
  trackers.set(client, tracker);
  return tracker;
}

/** The {@link WriteRefusals} of `client`, or undefined (a client of `copy`, `migrate` and the like, or one not yet open). */
export function writeRefusals(client: RedisClient): WriteRefusals | undefined {
  return trackers.get(client);
}
