import { readFileSync } from "node:fs";
import { quantile } from "./measure.js";

/** Throughput and latency of one measured phase. */
export interface PhaseResult {
  /** Operations completed (all succeeded, or the phase throws). */
  ops: number;
  /** Wall time spent in the phase's slices, in seconds. */
  seconds: number;
  /** Operations per second over that time. */
  opsPerSecond: number;
  /** Median latency in milliseconds. */
  p50Ms: number;
  /** 99th-percentile latency in milliseconds. */
  p99Ms: number;
  /** CPU time the metered processes spent per operation, in milliseconds (NaN when not metered). */
  cpuMsPerOp: number;
  /** CPU time the metered main thread spent per operation, in milliseconds (NaN when not metered): the part of {@link cpuMsPerOp} on the event loop. */
  mainThreadCpuMsPerOp: number;
}

/** Cumulative CPU seconds (user + system) of some set of processes. */
export type CpuMeter = () => number;

/** Latencies (milliseconds) and wall time (seconds) gathered over one or more slices. */
export class Sample {
  readonly latenciesMs: number[] = [];
  seconds = 0;
  cpuSeconds = Number.NaN;
  mainThreadCpuSeconds = Number.NaN;

  /** Throughput and p50/p99 of everything gathered so far. */
  summary(): PhaseResult {
    const sorted = [...this.latenciesMs].sort((a, b) => a - b);
    return {
      ops: sorted.length,
      seconds: this.seconds,
      opsPerSecond: sorted.length / this.seconds,
      p50Ms: quantile(sorted, 0.5),
      p99Ms: quantile(sorted, 0.99),
      cpuMsPerOp: (this.cpuSeconds * 1000) / sorted.length,
      mainThreadCpuMsPerOp: (this.mainThreadCpuSeconds * 1000) / sorted.length,
    };
  }
}

/**
 * Runs items `from` ..< `to` as `workers` concurrent loops: item i belongs to
 * worker i % workers, and each worker runs its items one after another, so at
 * most `workers` operations are in flight. Adds every latency, the slice's
 * wall time and, with `cpu`, the CPU time it measured to `sample` (and
 * with `mainThread`, a meter of one thread of that CPU, the main thread's).
 *
 * @throws the first operation error, after every loop has stopped.
 */
export async function runSlice(
  sample: Sample,
  workers: number,
  from: number,
  to: number,
  op: (worker: number, item: number) => Promise<unknown>,
  cpu?: CpuMeter,
  mainThread?: CpuMeter,
): Promise<void> {
  const started = performance.now();
  const cpuBefore = cpu?.();
  const mainBefore = mainThread?.();
  await Promise.all(
    Array.from({ length: workers }, async (_, w) => {
      for (let i = from + w; i < to; i += workers) {
        const t0 = performance.now();
        await op(w, i);
        sample.latenciesMs.push(performance.now() - t0);
      }
    }),
  );
  sample.seconds += (performance.now() - started) / 1000;
  if (cpu !== undefined) sample.cpuSeconds = added(sample.cpuSeconds, cpu() - cpuBefore!);
  if (mainThread !== undefined) sample.mainThreadCpuSeconds = added(sample.mainThreadCpuSeconds, mainThread() - mainBefore!);
}

/** `total` (NaN until the first slice is metered) plus `seconds`. */
function added(total: number, seconds: number): number {
  return (Number.isNaN(total) ? 0 : total) + seconds;
}

/**
 * A CpuMeter over the processes with the given ids (read from /proc, Linux
 * only) and, unless `includeSelf` is false, this process. Each process's
 * time is its `stat` line's user + system time, which counts threads that
 * have exited too, in 10 ms clock ticks (over a run of slices the ticks'
 * rounding mostly cancels; the main thread, metered alone, is read in
 * nanoseconds: see {@link mainThreadCpu}).
 */
export function processCpu(pids: readonly number[], includeSelf = true): CpuMeter {
  return () => {
    const own = process.cpuUsage();
    let total = includeSelf ? (own.user + own.system) / 1e6 : 0;
    for (const pid of pids) total += statCpuSeconds(`/proc/${pid}/stat`);
    return total;
  };
}

/** User + system CPU seconds in a /proc `stat` file (a process's, every thread it has run included). */
function statCpuSeconds(path: string): number {
  const fields = readFileSync(path, "utf8").split(") ")[1]!.split(" ");
  // utime and stime are fields 14 and 15 of the whole line, in clock ticks (100 per second on Linux).
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/**
 * A CpuMeter over the main thread of process `pid` alone (Linux only): its
 * event loop, without its worker threads or V8's helper threads (garbage
 * collection, compilation). Read in nanoseconds from its `schedstat`, not
 * in clock ticks: a slice of 2,000 small calls takes 50–100 ms of a main
 * thread's CPU, which 10 ms ticks would meter to about ±10 %.
 */
export function mainThreadCpu(pid: number): CpuMeter {
  return () => schedstatSeconds(`/proc/${pid}/task/${pid}/schedstat`);
}

/** The CPU seconds a thread has run, from its `/proc/PID/task/TID/schedstat` (first field: nanoseconds on a CPU). */
function schedstatSeconds(path: string): number {
  return Number(readFileSync(path, "utf8").split(" ")[0]) / 1e9;
}

/**
 * Runs `count` items through each of `ops` in alternating slices of `slice`
 * items (A then B, then B then A, ...), so that load from other processes on a
 * shared machine falls on every contender alike and their ratio stays fair.
 * `cpu`, when given, meters every slice: one meter for all contenders, or one
 * per contender (in the order of `ops`); `mainThread`, one meter per
 * contender of its main thread alone. Returns one Sample per contender,
 * in the order of `ops`.
 */
export async function interleaved(
  ops: ReadonlyArray<(worker: number, item: number) => Promise<unknown>>,
  workers: number,
  count: number,
  slice: number,
  cpu?: CpuMeter | readonly CpuMeter[],
  mainThread?: readonly CpuMeter[],
): Promise<Sample[]> {
  const samples = ops.map(() => new Sample());
  const meterOf = (k: number) => (typeof cpu === "function" || cpu === undefined ? cpu : cpu[k]);
  for (let from = 0, turn = 0; from < count; from += slice, turn++) {
    const order = turn % 2 === 0 ? ops.map((_, k) => k) : ops.map((_, k) => ops.length - 1 - k);
    for (const k of order) await runSlice(samples[k]!, workers, from, Math.min(count, from + slice), ops[k]!, meterOf(k), mainThread?.[k]);
  }
  return samples;
}
