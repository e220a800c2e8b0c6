import { v8Collector, type Collector } from "../storage/v8-collector.js";
import { sparePayloadMemory, spareRequestMemory } from "../../common/spare-payload-memory.js";

/** Milliseconds between the in-flight budget emptying and the first look for an idle moment to collect in. */
export const TRIM_DELAY_MS = 500;

/**
 * Milliseconds without a call that make the process idle enough for the
 * trim's full collection: after {@link TRIM_DELAY_MS}, the trimmer looks
 * again every this many milliseconds until one has passed without a call.
 */
export const IDLE_WINDOW_MS = 100;

/**
 * Longest the full collection waits for an idle moment, in milliseconds
 * after {@link TRIM_DELAY_MS}: then it runs anyway, once per burst.
 */
export const TRIM_WAIT_LIMIT_MS = 5000;

/**
 * The traffic the trimmer watches (the in-flight budget, inflight-budget.ts):
 * every call takes budget for its request as it arrives.
 */
export interface CallActivity {
  /** Bytes in flight now (0 when no call holds any). */
  readonly used: number;
  /** Times budget was taken since the process started: grows with every call. */
  readonly takes: number;
}

/** A collection scheduled for when the process is idle after a burst of large calls. */
export interface MemoryTrimmer {
  /**
   * Schedules one full collection for the first idle moment from
   * {@link TRIM_DELAY_MS} on, as `activity` tells it (a later call replaces
   * the schedule).
   */
  schedule(activity: CallActivity): void;
  /** Drops the scheduled collection, if any: large calls are arriving again, so the process is not idle. */
  cancel(): void;
}

/**
 * A {@link MemoryTrimmer} running one full garbage collection once the
 * process is idle after a burst of large calls. The server schedules it when
 * the in-flight budget empties after such a burst, so that the buffers those
 * calls left behind are freed and memory returns towards the baseline while
 * the process is idle (issue 10 deliverable 3); without it V8 keeps them
 * until the next allocation pressure. The spare memory kept for large Loads
 * and requests (common/spare-payload-memory.ts) is let go too.
 *
 * The spare memory is let go {@link TRIM_DELAY_MS} after the budget emptied.
 * The collection is a pause of the main thread: 10–40 ms, the marking of the
 * whole heap in one go (a forced collection is never incremental). So it
 * runs only when no call is in flight and none has arrived for
 * {@link IDLE_WINDOW_MS} (looked for from {@link TRIM_DELAY_MS} after the
 * budget emptied): run while small calls kept coming, as it was before, it
 * was the slowest moment of a steady stream of Renews after a burst (Renew
 * p99 25–47 ms instead of 4 ms on Redis, issue 11, bench/RESULTS.md). A
 * process that is never idle that long collects anyway
 * {@link TRIM_WAIT_LIMIT_MS} later: its small calls allocate too little for
 * V8 to free those buffers soon (a fresh-eyes run kept 630–860 MiB of RSS
 * after bursts of 64 MiB Saves while a call came every 20 ms, 140 MiB once
 * they stopped), so one pause per burst is the price of memory coming
 * back. A large call arriving meanwhile
 * cancels the trim (inflight-budget.ts): a full collection in the middle of
 * the next large Save stalled the small calls beside it (issue 11).
 *
 * @param collect the collector to run (default: this thread's V8 collector, full and synchronous).
 */
export function memoryTrimmer(collect: Collector = v8Collector()): MemoryTrimmer {
  let timer: NodeJS.Timeout | undefined;
  const lookAfter = (ms: number, activity: CallActivity, takes: number, until: number) => {
    timer = setTimeout(() => {
      sparePayloadMemory.drop();
      spareRequestMemory.drop();
      const busy = activity.used > 0 || activity.takes !== takes;
      if (busy && performance.now() < until) return lookAfter(IDLE_WINDOW_MS, activity, activity.takes, until);
      timer = undefined;
      void collect();
    }, ms).unref();
  };
  return {
    schedule(activity) {
      clearTimeout(timer);
      lookAfter(TRIM_DELAY_MS, activity, activity.takes, performance.now() + TRIM_DELAY_MS + TRIM_WAIT_LIMIT_MS);
    },
    cancel() {
      clearTimeout(timer);
      timer = undefined;
    },
  };
}
