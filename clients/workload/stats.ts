/** Latency samples, call and byte counts of one RPC (or other measured step) during a workload run. */
export interface RpcStat {
  name: string;
  calls: number;
  /** Unexpected failures. */
  errors: number;
  /** Expected refusals, counted among calls: a lease held by another owner, a claim that lost the race. */
  rejected: number;
  /** Bytes of payload sent (snapshots, events, records), not counting gRPC framing. */
  bytesOut: number;
  /** Bytes of payload received. */
  bytesIn: number;
  /** Milliseconds per call (or per delivered record, for follow latency). */
  samples: number[];
}

/** Percentile (0–100) of sorted samples by nearest rank; 0 when there are none. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return 0;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank]!;
}

/** Counters for every RPC of a run, plus a running total for the progress line. */
export class WorkloadStats {
  private readonly byName = new Map<string, RpcStat>();
  /** `performance.now()` when the run started. */
  readonly startedAt = performance.now();
  /** Calls sent again, or writes looked up, because of an outage (the `outages` option). */
  outageRetries = 0;

  private stat(name: string): RpcStat {
    let s = this.byName.get(name);
    if (s === undefined) {
      s = { name, calls: 0, errors: 0, rejected: 0, bytesOut: 0, bytesIn: 0, samples: [] };
      this.byName.set(name, s);
    }
    return s;
  }

  /**
   * Times `fn` as one call of `name`, counting `bytesOut` sent and the bytes
   * `bytesIn` reports from the result. A rejection is rethrown; it counts as
   * an error unless `expected` accepts it, then as a (rejected) call.
   */
  async time<T>(name: string, bytesOut: number, fn: () => Promise<T>, bytesIn?: (result: T) => number, expected?: (err: unknown) => boolean): Promise<T> {
    const s = this.stat(name);
    const t0 = performance.now();
    try {
      const result = await fn();
      s.samples.push(performance.now() - t0);
      s.calls++;
      s.bytesOut += bytesOut;
      if (bytesIn !== undefined) s.bytesIn += bytesIn(result);
      return result;
    } catch (err) {
      if (expected?.(err) === true) {
        s.samples.push(performance.now() - t0);
        s.calls++;
        s.rejected++;
      } else {
        s.errors++;
      }
      throw err;
    }
  }

  /** Records one sample of `ms` for `name` without timing a call (e.g. append-to-delivery lag of a follower). */
  sample(name: string, ms: number, bytesIn = 0): void {
    const s = this.stat(name);
    s.calls++;
    s.bytesIn += bytesIn;
    s.samples.push(ms);
  }

  /** Every stat, sorted by name. */
  all(): RpcStat[] {
    return [...this.byName.values()].sort((a, b) => a.name.localeCompare(b.name));
  }

  /** Seconds since the run started. */
  elapsedSeconds(): number {
    return (performance.now() - this.startedAt) / 1000;
  }

  /** Totals over every RPC stat (names without a space; derived samples such as "follow delivery" are left out). */
  totals(): { calls: number; errors: number; bytes: number } {
    let calls = 0;
    let errors = 0;
    let bytes = 0;
    for (const s of this.byName.values()) {
      if (s.name.includes(" ")) continue;
      calls += s.calls;
      errors += s.errors;
      bytes += s.bytesOut + s.bytesIn;
    }
    return { calls, errors, bytes };
  }
}
