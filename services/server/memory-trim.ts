import { v8Collector } from "../storage/v8-collector.js";
import { sparePayloadMemory, spareRequestMemory } from "../../common/spare-payload-memory.js";

/** Milliseconds between the in-flight budget emptying and the collection it triggers. */
export const TRIM_DELAY_MS = 500;

/** A collection scheduled for when the process is idle after a burst of large calls. */
export interface MemoryTrimmer {
  /** Schedules one full collection {@link TRIM_DELAY_MS} from now (a later call within the delay pushes it back). */
  schedule(): void;
  /** Drops the scheduled collection, if any: large calls are arriving again, so the process is not idle. */
  cancel(): void;
}

/**
 * A {@link MemoryTrimmer} running one full garbage collection shortly after
 * it is scheduled. The server schedules it when the in-flight budget
 * empties after a burst of large calls, so that the buffers those calls
 * left behind are freed and memory returns towards the baseline while the
 * process is idle (issue 10 deliverable 3); without it V8 keeps them until
 * the next allocation pressure; the spare memory kept for large Loads and
 * requests (common/spare-payload-memory.ts) is let go first. A large call arriving within the delay
 * cancels it (inflight-budget.ts): a full collection is a pause of 10–40 ms
 * on the main thread, and run in the middle of the next large Save it
 * stalled the small calls beside it (issue 11).
 */
export function memoryTrimmer(): MemoryTrimmer {
  const gc = v8Collector();
  let timer: NodeJS.Timeout | undefined;
  return {
    schedule() {
      clearTimeout(timer);
      timer = setTimeout(() => {
        sparePayloadMemory.drop();
        spareRequestMemory.drop();
        gc();
      }, TRIM_DELAY_MS).unref();
    },
    cancel() {
      clearTimeout(timer);
      timer = undefined;
    },
  };
}
