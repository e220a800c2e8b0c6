/**
 * Longest delay a Node.js timer keeps: 2^31 − 1 ms, about 24.8 days. A
 * longer `setTimeout` fires after 1 ms instead (with a
 * `TimeoutOverflowWarning`), and so do the deadline timers of grpc-js and
 * connect-es, which pass a caller's timeout to it as it is.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * An abort signal that aborts with `reason()` once `ms` milliseconds have
 * passed, for any `ms` (a 30-day deadline too: beyond {@link MAX_TIMER_MS}
 * the wait is made of several timers in a row). `clear` stops it; call it
 * when the work it bounds is over, so no timer outlives the work.
 *
 * @throws RangeError when `ms` is NaN (a timer of NaN ms would fire at once, again and again).
 */
export function deadlineAfter(ms: number, reason: () => unknown): { signal: AbortSignal; clear: () => void } {
  if (Number.isNaN(ms)) throw new RangeError("deadlineAfter: ms is NaN");
  const controller = new AbortController();
  const due = performance.now() + ms;
  let timer: NodeJS.Timeout | undefined;
  const arm = () => {
    const left = due - performance.now();
    if (left <= 0) return controller.abort(reason());
    timer = setTimeout(arm, Math.min(left, MAX_TIMER_MS));
  };
  arm();
  return { signal: controller.signal, clear: () => clearTimeout(timer) };
}
