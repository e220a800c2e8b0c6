import type { Timestamp } from "@bufbuild/protobuf/wkt";

/** A Timestamp as (fractional) milliseconds since the Unix epoch, for comparisons with Date.now(). */
export function timestampMillis(ts: Timestamp | undefined): number {
  if (ts === undefined) throw new Error("expected a timestamp, got none");
  return Number(ts.seconds) * 1000 + ts.nanos / 1e6;
}

/** A Timestamp as integer nanoseconds since the Unix epoch (exact). */
export function timestampNanos(ts: Timestamp | undefined): bigint {
  if (ts === undefined) throw new Error("expected a timestamp, got none");
  return ts.seconds * 1_000_000_000n + BigInt(ts.nanos);
}

/**
 * Sleeps until the local wall clock is `marginMs` past `expiry` (the test
 * servers and redis-server run on this host, so they share this clock).
 */
export async function waitPast(expiry: Timestamp | undefined, marginMs = 50): Promise<void> {
  const wait = timestampMillis(expiry) + marginMs - Date.now();
  if (wait > 0) await new Promise((r) => setTimeout(r, wait));
}

/** Sleeps `ms` milliseconds. */
export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
