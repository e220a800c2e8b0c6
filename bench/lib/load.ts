/** Throughput and latency of one measured phase. */
export interface PhaseResult {
  /** Operations completed (all succeeded, or the phase throws). */
  ops: number;
  /** Wall time of the phase in seconds. */
  seconds: number;
  /** Operations per second over the phase. */
  opsPerSecond: number;
  /** Median latency in milliseconds. */
  p50Ms: number;
  /** 99th-percentile latency in milliseconds. */
  p99Ms: number;
}

/** The `q` quantile (0..1) of ascending-sorted `sorted`, nearest rank. */
function quantile(sorted: Float64Array, q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

/**
 * Runs `count` operations as `workers` concurrent loops: item i belongs to
 * worker i % workers, and each worker runs its items one after another, so at
 * most `workers` operations are in flight. Measures every operation's latency.
 *
 * @throws the first operation error, after every loop has stopped.
 */
export async function runPhase(workers: number, count: number, op: (worker: number, item: number) => Promise<unknown>): Promise<PhaseResult> {
  const latencies = new Float64Array(count);
  const started = performance.now();
  await Promise.all(
    Array.from({ length: workers }, async (_, w) => {
      for (let i = w; i < count; i += workers) {
        const t0 = performance.now();
        await op(w, i);
        latencies[i] = performance.now() - t0;
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  latencies.sort();
  return { ops: count, seconds, opsPerSecond: count / seconds, p50Ms: quantile(latencies, 0.5), p99Ms: quantile(latencies, 0.99) };
}

/** Formats a number with `digits` decimals, or as a whole number with thousands separators when large. */
export function fmt(n: number, digits = 2): string {
  return n >= 1000 ? Math.round(n).toLocaleString("en-US") : n.toFixed(digits);
}
