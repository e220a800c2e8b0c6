import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

/** Milliseconds between the in-flight budget emptying and the collection it triggers. */
const TRIM_DELAY_MS = 500;

/**
 * Returns a function that schedules one full garbage collection shortly
 * after it is called (later calls within the delay push it back). The server
 * calls it when the in-flight budget empties after a burst of large calls, so
 * that the buffers those calls left behind are freed and memory returns
 * towards the baseline while the process is idle (issue 10 deliverable 3);
 * without it V8 keeps them until the next allocation pressure. Node has no
 * public handle on the collector, so `--expose-gc` is set at run time and the
 * `gc` function taken from a fresh context (the documented V8 flag route).
 */
export function memoryTrimmer(): () => void {
  setFlagsFromString("--expose-gc");
  const gc = runInNewContext("gc") as () => void;
  let timer: NodeJS.Timeout | undefined;
  return () => {
    clearTimeout(timer);
    timer = setTimeout(gc, TRIM_DELAY_MS).unref();
  };
}
