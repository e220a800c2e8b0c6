/**
 * Latency and throughput measurement for the benchmarks: run an async
 * operation with a fixed number of calls in flight for a fixed time, record
 * each call's latency, and summarise.
 */

/** Summary of one measured run. Latencies in milliseconds, throughput in calls per second. */
export interface RunResult {
  calls: number;
  seconds: number;
  perSecond: number;
  p50Ms: number;
  p99Ms: number;
}

/** The value at quantile `q` (0..1) of an ascending-sorted array. */
export function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

/**
 * Runs `op` with `inFlight` concurrent callers until `durationMs` has passed
 * (after a warm-up of `warmupMs` that is not recorded). `op(i)` gets a
 * running call number.
 */
export async function measure(op: (i: number) => Promise<unknown>, inFlight: number, durationMs: number, warmupMs = 300): Promise<RunResult> {
  let n = 0;
  const warmEnd = Date.now() + warmupMs;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (Date.now() < warmEnd) await op(n++);
    }),
  );
  const latencies: number[] = [];
  const start = process.hrtime.bigint();
  const end = Date.now() + durationMs;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (Date.now() < end) {
        const t = process.hrtime.bigint();
        await op(n++);
        latencies.push(Number(process.hrtime.bigint() - t) / 1e6);
      }
    }),
  );
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  latencies.sort((a, b) => a - b);
  return { calls: latencies.length, seconds, perSecond: latencies.length / seconds, p50Ms: quantile(latencies, 0.5), p99Ms: quantile(latencies, 0.99) };
}

/**
 * Formats a number with at most `digits` significant digits; below 10^-6 in
 * size it is printed 0 (what a difference of two equal figures leaves, such
 * as -5.6e-14, is rounding, not a measurement).
 */
export function fmt(x: number, digits = 3): string {
  if (!Number.isFinite(x)) return "n/a";
  return Math.abs(x) < 1e-6 ? "0" : Number(x.toPrecision(digits)).toString();
}
