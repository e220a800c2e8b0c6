import { v8Collector, type Collector } from "./v8-collector.js";

/** Milliseconds between the first view let go and the young-generation collection that frees it. */
export const COLLECT_AFTER_MS = 100;

/** Milliseconds without a view let go before the full collection that frees views the young collections missed. */
export const QUIET_MS = 1000;

/**
 * Milliseconds without work on the thread that its full collection waits
 * for (see {@link sharedMemoryReleaser}'s `activity`), looked for every this
 * many milliseconds once {@link QUIET_MS} have passed.
 */
export const IDLE_WINDOW_MS = 100;

/** Longest the full collection waits for an idle moment, in milliseconds from the last view let go: then it runs anyway. */
export const IDLE_WAIT_LIMIT_MS = 30_000;

/**
 * For a worker thread handed views of shared memory (SharedArrayBuffer: the
 * payload of a large gRPC request, server/grpc-message-joiner.ts): returns a
 * function to call when the thread lets go of such views, so that they stop
 * holding that memory. A SharedArrayBuffer lives while any thread still has
 * an object pointing at it, until that thread's collector frees the object;
 * the projection worker and the SQLite writer allocate so little that they
 * hardly ever collect, and without this every 64 MiB Save could stay in
 * memory (16 Saves with the projection worker's views kept: 715 MiB,
 * against 192 MiB).
 *
 * - {@link COLLECT_AFTER_MS} after the first call, one young-generation
 *   collection (the calls meanwhile share it; a 64 MiB Save is many staged
 *   chunks: one or a few collections, not one per chunk). The views are
 *   young objects, so it frees them: about 1 ms of this thread's time. A
 *   full collection, which this ran before, is 5–20 ms on the SQLite
 *   writer (its async start still ends in a pause of the thread), and every
 *   Renew or Append waiting for the writer waited for it. SQLite Renew p99
 *   beside a loop of 64 MiB Saves, paired 8 s runs: 18–21 ms with full
 *   collections, 14–15 ms with young ones in three of four pairs; later, on
 *   a slower disk, 26–30 against 23–29 ms (issue 11, bench/RESULTS.md).
 * - {@link QUIET_MS} after the last call, one full collection, started
 *   asynchronously: it frees the views a young collection found still in
 *   use and moved to the old generation, once large writes have stopped.
 *   With `activity`, it waits further for a moment when the thread is idle:
 *   no change of `activity()` for {@link IDLE_WINDOW_MS}. On the SQLite
 *   writer, whose every small write waits for it, the collection run while
 *   Renews kept coming was an 8–13 ms stall of them a second after each
 *   burst of Saves (issue 11, bench/RESULTS.md); a writer never idle that
 *   long collects anyway after {@link IDLE_WAIT_LIMIT_MS}: it allocates too little for
 *   its own collections to free them soon.
 *
 * @param options.activity a count the thread raises whenever it does work
 *   (the SQLite writer: batches answered); left out, the full collection
 *   does not wait for an idle moment.
 * @param options.collect the collector (default: this thread's V8 collector).
 * @param options.waitLimitMs longest wait for an idle moment, in milliseconds
 *   from the last view let go (default {@link IDLE_WAIT_LIMIT_MS}).
 */
export function sharedMemoryReleaser(options: { activity?: () => number; collect?: Collector; waitLimitMs?: number } = {}): () => void {
  const { activity, collect = v8Collector(), waitLimitMs = IDLE_WAIT_LIMIT_MS } = options;
  let scheduled = false;
  let quiet: NodeJS.Timeout | undefined;
  const collectWhenIdle = (ms: number, seen: number | undefined, until: number) => {
    quiet = setTimeout(() => {
      const now = activity?.();
      if (now !== seen && performance.now() < until) return collectWhenIdle(IDLE_WINDOW_MS, now, until);
      void collect({ type: "major", execution: "async" });
    }, ms).unref();
  };
  return () => {
    clearTimeout(quiet);
    collectWhenIdle(QUIET_MS, activity?.(), performance.now() + waitLimitMs);
    if (scheduled) return;
    scheduled = true;
    setTimeout(() => {
      scheduled = false;
      void collect({ type: "minor" });
    }, COLLECT_AFTER_MS);
  };
}
