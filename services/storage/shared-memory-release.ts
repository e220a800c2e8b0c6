import { v8Collector } from "./v8-collector.js";

/** Milliseconds between the first view let go and the collection that frees it. */
const COLLECT_AFTER_MS = 100;

/**
 * For a worker thread handed views of shared memory (SharedArrayBuffer: the
 * payload of a large gRPC request, server/grpc-message-joiner.ts): returns a
 * function that schedules one collection of this thread's heap, so that the
 * views it dropped stop holding that memory. A SharedArrayBuffer lives while
 * any thread still has an object pointing at it, until that thread's
 * collector frees the object; the projection worker and the SQLite writer
 * allocate so little that they hardly ever collect, and without this every
 * 64 MiB Save could stay in memory (16 Saves with the projection worker's
 * views kept: 715 MiB, against 192 MiB). The collection runs
 * {@link COLLECT_AFTER_MS} after the first call, and the calls meanwhile
 * share it (a 64 MiB Save is 64 staged chunks: one or a few collections,
 * not 64). It is a major one, started asynchronously (concurrent marking:
 * well under a millisecond of this thread's time on these small heaps).
 */
export function sharedMemoryReleaser(): () => void {
  const collect = v8Collector();
  let scheduled = false;
  return () => {
    if (scheduled) return;
    scheduled = true;
    setTimeout(() => {
      scheduled = false;
      void collect({ type: "major", execution: "async" });
    }, COLLECT_AFTER_MS);
  };
}
