import { LogError } from "./log-error.js";
import type { ChangeHint, EventLogStore, LogPage } from "./store.js";

/** Limits of one process's follow streams, from `serve` flags. */
export interface FollowLimits {
  /** Most open follow streams (`--max-followers`); past it, `follow_capacity`. */
  maxFollowers: number;
  /**
   * Most records a live follower may fall behind the tail (`--follow-buffer`)
   * before it must keep up: past it, a follower that receives nothing for
   * `followStallMs` ends with `follow_lagging`.
   */
  followBuffer: number;
  /**
   * Milliseconds a live follower more than `followBuffer` records behind may
   * go without a record delivered before it is cut off (`--follow-stall`,
   * default {@link DEFAULT_FOLLOW_STALL_MS}). A follower that keeps reading
   * through a burst is never cut: it holds no queue (it re-reads the store),
   * so lag alone costs nothing; only a stalled reader holds a slot for nothing.
   */
  followStallMs?: number;
}

/** Default of {@link FollowLimits.followStallMs}: 2 s. */
export const DEFAULT_FOLLOW_STALL_MS = 2000;

/** A gauge the hub moves up and down (a prom-client Gauge fits). */
export interface FollowerGauge {
  inc(): void;
  dec(): void;
}

/**
 * What the hub reports: `open`, follow streams admitted (the
 * `mecatl_drivers_followers` gauge); `parked`, those of them that have
 * reached the tail of their log and wait for the next change
 * (`mecatl_drivers_followers_parked`); and `parks`, how many times a follower
 * parked (`mecatl_drivers_follower_parks_total`). Tests wait for `parks` to
 * move instead of sleeping before they act on a parked follower (issue 15);
 * being monotone, it is not confused by other streams ending meanwhile.
 */
export interface FollowerGauges {
  open: FollowerGauge;
  parked: FollowerGauge;
  parks: { inc(): void };
}

/**
 * The follow hub: one per process and store. It admits follow streams up to
 * {@link FollowLimits.maxFollowers}, registers each with the store's shared
 * change feed (which holds the only backend connection used for wake-ups),
 * and routes change notices to the followers of the changed session.
 * Followers keep no records here: a woken follower re-reads the log from its
 * last delivered position through the shared store connection, so a follower
 * costs a few hundred bytes while parked, whatever the log size.
 *
 * Followers' page reads are shared: when many followers of one session wake
 * for the same append they ask for the same page, and one storage read serves
 * them all. A follower only joins a read that started after it registered:
 * such a read sees every commit from before its start, and every later
 * commit wakes the follower again, so sharing never hides a record.
 */
export class FollowHub {
  private readonly bySession = new Map<string, Set<Follower>>();
  private readonly reads = new Map<string, { started: number; page: Promise<LogPage | undefined> }>();
  private open = 0;
  private clock = 0;

  constructor(
    private readonly store: EventLogStore,
    private readonly limits: FollowLimits,
    private readonly gauges?: FollowerGauges,
  ) {
    store.feed.listen(
      (sessionId, hint) => this.changed(sessionId, hint),
      () => this.changedAll(),
    );
  }

  /** Open follow streams in this process. */
  get size(): number {
    return this.open;
  }

  /**
   * Admits a follower of `sessionId` and registers it for wake-ups. Resolves
   * once any change committed from then on will wake it, so the caller reads
   * the log only after this (register before draining: nothing is missed).
   *
   * @throws LogError `follow_capacity` at once, before any storage work, when
   *   `maxFollowers` streams are already open.
   * @throws the feed's StoreFailure when the wake-up registration fails or
   *   is not confirmed within `--store-timeout` (UNAVAILABLE).
   */
  async admit(sessionId: string): Promise<Follower> {
    if (this.open >= this.limits.maxFollowers) {
      throw new LogError("follow_capacity", `this server already holds ${this.limits.maxFollowers} follow streams (--max-followers); retry later or on another instance`);
    }
    this.open++;
    this.gauges?.open.inc();
    const follower = new Follower(this, sessionId, this.limits.followBuffer, this.limits.followStallMs ?? DEFAULT_FOLLOW_STALL_MS, this.gauges);
    let set = this.bySession.get(sessionId);
    if (set === undefined) this.bySession.set(sessionId, (set = new Set()));
    set.add(follower);
    try {
      await this.store.feed.watch(sessionId);
    } catch (err) {
      this.remove(follower, false);
      throw err;
    }
    follower.registered = ++this.clock;
    return follower;
  }

  /**
   * Reads a page for `follower`, joining an identical read in flight when
   * that read started after the follower registered.
   */
  read(follower: Follower, afterPosition: number, maxRecords: number): Promise<LogPage | undefined> {
    const key = `${afterPosition}:${maxRecords}:${follower.sessionId}`;
    const shared = this.reads.get(key);
    if (shared !== undefined && shared.started > follower.registered) return shared.page;
    const entry = { started: ++this.clock, page: this.store.readPage(follower.sessionId, afterPosition, maxRecords) };
    this.reads.set(key, entry);
    const forget = () => {
      if (this.reads.get(key) === entry) this.reads.delete(key);
    };
    entry.page.then(forget, forget);
    return entry.page;
  }

  /** @internal Called once per follower by {@link Follower.release}. */
  remove(follower: Follower, watched = true): void {
    const set = this.bySession.get(follower.sessionId);
    set?.delete(follower);
    if (set?.size === 0) this.bySession.delete(follower.sessionId);
    this.open--;
    this.gauges?.open.dec();
    if (watched) this.store.feed.unwatch(follower.sessionId);
  }

  private changed(sessionId: string, hint: ChangeHint): void {
    const set = this.bySession.get(sessionId);
    if (set !== undefined) for (const f of set) f.notify(hint);
  }

  private changedAll(): void {
    for (const set of this.bySession.values()) for (const f of set) f.notify(undefined);
  }
}

/**
 * One follow stream's registration. The reader updates {@link position} and
 * {@link generation} as it delivers records and sets {@link live} once it first
 * reaches the tail; the hub calls {@link notify} on changes. Wake-ups are
 * level-triggered (a dirty flag), so a change that lands while the reader is
 * busy is never lost: the next {@link wait} returns at once.
 */
export class Follower {
  /** Position of the last record delivered (0 = none); set through {@link delivered}. */
  position = 0;
  /** Generation of the log being followed, once known. */
  generation: string | undefined;
  /** True once the reader reached the tail; only then does the lag limit apply. */
  live = false;
  /** Hub clock value when registration completed (reads started later may be shared). */
  registered = Number.POSITIVE_INFINITY;
  private dirty = false;
  private lagged = false;
  private released = false;
  private wake: (() => void) | undefined;
  /** `performance.now()` when the last record was delivered (or the follower was admitted). */
  private progressAt = performance.now();
  /** Longest log length hinted so far in the followed generation. */
  private tail = 0;
  /** Pending re-check of a follower found behind: it is cut if it delivered nothing meanwhile. */
  private stallTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly hub: FollowHub,
    readonly sessionId: string,
    private readonly followBuffer: number,
    private readonly followStallMs: number,
    private readonly gauges?: FollowerGauges,
  ) {}

  /** Records that the record at `position` was handed to the stream: the follower is making progress. */
  delivered(position: number): void {
    this.position = position;
    this.progressAt = performance.now();
  }

  /** Reads the page after `afterPosition` through the hub's shared reads. */
  read(afterPosition: number, maxRecords: number): Promise<LogPage | undefined> {
    return this.hub.read(this, afterPosition, maxRecords);
  }

  /**
   * A change of the followed session. A hint that proves nothing new for this
   * follower (same generation, length not beyond its position) is ignored. A
   * live follower more than `followBuffer` records behind the hinted length
   * is checked for a stall ({@link checkStall}).
   */
  notify(hint: ChangeHint): void {
    if (hint !== undefined && this.generation !== undefined && hint.generation === this.generation) {
      if (hint.length <= this.position) return;
      this.tail = Math.max(this.tail, hint.length);
      if (this.live) this.checkStall();
    }
    this.dirty = true;
    this.wake?.();
  }

  /**
   * Cuts the follower off (it gives up its slot at once; its reader then ends
   * with `follow_lagging`) when it is more than `followBuffer` records behind
   * the tail and has delivered nothing for `followStallMs`; while it is behind
   * but was delivering recently, checks again when that time is up, so a
   * reader that stops during a burst is cut even if no append follows.
   */
  private checkStall(): void {
    if (this.released || this.tail - this.position <= this.followBuffer) return;
    const idleMs = performance.now() - this.progressAt;
    if (idleMs >= this.followStallMs) {
      this.lagged = true;
      this.release();
      this.wake?.();
      return;
    }
    if (this.stallTimer !== undefined) return;
    this.stallTimer = setTimeout(() => {
      this.stallTimer = undefined;
      this.checkStall();
    }, this.followStallMs - idleMs + 1);
    this.stallTimer.unref();
  }

  /** @throws LogError `follow_lagging` once the follower was cut off for falling behind. */
  throwIfLagged(): void {
    if (this.lagged) {
      throw new LogError(
        "follow_lagging",
        `the follower fell more than ${this.followBuffer} records behind the log (--follow-buffer) and read nothing for ${this.followStallMs} ms (--follow-stall); resume from the last cursor`,
      );
    }
  }

  /**
   * Waits until something changed since the last wait, or `signal` aborts.
   * While it waits the follower counts as parked (see {@link FollowerGauges}).
   *
   * @returns true to re-read the log, false when the stream should end (cancelled).
   * @throws LogError `follow_lagging` when the follower was cut off.
   */
  async wait(signal: AbortSignal): Promise<boolean> {
    for (;;) {
      this.throwIfLagged();
      if (signal.aborted) return false;
      if (this.dirty) {
        this.dirty = false;
        return true;
      }
      this.gauges?.parked.inc();
      this.gauges?.parks.inc();
      await new Promise<void>((resolve) => {
        const done = () => {
          signal.removeEventListener("abort", done);
          this.wake = undefined;
          this.gauges?.parked.dec();
          resolve();
        };
        this.wake = done;
        signal.addEventListener("abort", done, { once: true });
      });
    }
  }

  /** Gives up the follower's slot and wake-up registration; safe to call twice. */
  release(): void {
    if (this.released) return;
    this.released = true;
    clearTimeout(this.stallTimer);
    this.hub.remove(this);
  }
}
