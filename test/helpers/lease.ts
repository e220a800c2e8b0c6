import type { Timestamp } from "@bufbuild/protobuf/wkt";
import { clockPast } from "./wait.js";

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
 * Waits until the local wall clock is `marginMs` past `expiry` (the test
 * servers and redis-server run on this host, so they share this clock): a
 * lease's expiry is a matter of time passing, so this is the one wait lease
 * tests need, and it is tied to the lease's own timestamps.
 */
export function waitPast(expiry: Timestamp | undefined, marginMs = 50): Promise<void> {
  return clockPast(timestampNanos(expiry) + BigInt(marginMs) * 1_000_000n);
}

/** Waits until the local wall clock reaches `beforeMs` before `expiry` (e.g. half a TTL into a lease). */
export function waitUntilBefore(expiry: Timestamp | undefined, beforeMs: number): Promise<void> {
  return clockPast(timestampNanos(expiry) - BigInt(beforeMs) * 1_000_000n);
}
