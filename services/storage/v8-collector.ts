import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

/**
 * V8's garbage collector for the calling thread's heap, as `--expose-gc`
 * gives it: with no options a full, synchronous collection; `{ type:
 * "major", execution: "async" }` starts one that marks concurrently and
 * resolves when it is done. Node has no public handle on the collector, so
 * `--expose-gc` is set at run time and the `gc` function taken from a fresh
 * context (the documented V8 flag route). Used by the main thread's idle
 * trim (server/memory-trim.ts) and by workers letting go of shared memory
 * (shared-memory-release.ts).
 */
export type Collector = (options?: { type?: "major" | "minor"; execution?: "sync" | "async" }) => Promise<void> | void;

/** The {@link Collector} of the calling thread. */
export function v8Collector(): Collector {
  setFlagsFromString("--expose-gc");
  return runInNewContext("gc") as Collector;
}
