import { ConnectError } from "@connectrpc/connect";
import { StoreFailure } from "../storage/store-failure.js";
import type { Logger } from "./logger.js";
import type { Metrics } from "./metrics.js";

/** Milliseconds during which repeats of one store failure are counted instead of logged (10 s). */
export const FAILURE_LOG_INTERVAL_MS = 10_000;

/** One failure (kind + message) seen in the current interval. */
interface OpenInterval {
  /** Repeats since the last line logged for this failure. */
  repeats: number;
  timer: NodeJS.Timeout;
}

/**
 * Logs store failures that reached a caller without flooding the log (issue
 * 9): the first occurrence of a failure (same kind and message) is logged at
 * once (`store failure`, warn, with `kind`, `rpc` and `err`); repeats within
 * the next `intervalMs` are only counted, and at the end of the interval one
 * line (`store failure repeated`) gives their count, then a new interval
 * starts. An interval without repeats ends silently, so the next occurrence
 * is logged at once again. A failure lasting T ms thus costs at most
 * 1 + T / intervalMs lines. Every failure, logged or not, counts in
 * `mecatl_drivers_store_failures_total{kind}`.
 */
export class StoreFailureLog {
  private readonly open = new Map<string, OpenInterval>();

  constructor(
    private readonly logger: Logger,
    private readonly metrics: Metrics,
    private readonly intervalMs = FAILURE_LOG_INTERVAL_MS,
  ) {}

  /** Counts `failure`, answered to a call of `rpc` (`Service/Method`), and logs it unless it repeats one logged in this interval. */
  record(rpc: string, failure: StoreFailure): void {
    this.metrics.storeFailures.inc({ kind: failure.kind });
    const key = `${failure.kind}\n${failure.message}`;
    const open = this.open.get(key);
    if (open !== undefined) {
      open.repeats++;
      return;
    }
    const cause = failure.cause instanceof Error ? failure.cause.message : undefined;
    this.logger.warn({ kind: failure.kind, rpc, err: failure.message, cause }, "store failure");
    this.startInterval(key, failure.kind, failure.message);
  }

  /**
   * Opens the interval of one failure. It keeps the failure's kind and
   * message, never the failure itself: an error holds the frames of its
   * stack until the stack is printed, and with them whatever their closures
   * hold. A Save refused for want of time held its 60 MiB payload that way,
   * for as long as its interval ran, past the idle collection that should
   * have freed it (a fresh-eyes run: RSS stayed at ~440 MiB after a burst
   * of 8 × 60 MiB Saves of which 5 failed).
   */
  private startInterval(key: string, kind: string, message: string): void {
    const timer = setTimeout(() => {
      const open = this.open.get(key)!;
      this.open.delete(key);
      if (open.repeats === 0) return;
      this.logger.warn({ kind, err: message, repeats: open.repeats, intervalMs: this.intervalMs }, "store failure repeated");
      this.startInterval(key, kind, message);
    }, this.intervalMs);
    timer.unref();
    this.open.set(key, { repeats: 0, timer });
  }
}

const logs = new WeakMap<Metrics, StoreFailureLog>();

/**
 * The hook the RPC layer calls with every error a call ends with (one line in
 * instrument.ts): when it is a {@link StoreFailure} (or a ConnectError caused
 * by one), counts and logs it through the one {@link StoreFailureLog} of the
 * server that owns `options.metrics`. Other errors are left to the caller.
 *
 * @param rpc `Service/Method`, for the log line.
 */
export function recordStoreFailure(options: { metrics: Metrics; logger: Logger }, rpc: string, err: unknown): void {
  const failure = err instanceof ConnectError ? err.cause : err;
  if (!(failure instanceof StoreFailure)) return;
  let log = logs.get(options.metrics);
  if (log === undefined) {
    log = new StoreFailureLog(options.logger, options.metrics);
    logs.set(options.metrics, log);
  }
  log.record(rpc, failure);
}
