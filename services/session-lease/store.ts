import type { AcquireResult, ReleaseResult, RenewResult } from "./rules.js";

/**
 * The backend-neutral lease store behind SessionLeaseService
 * (wire-contract.md section 4.3). Each method applies one rule of rules.ts
 * atomically against every other caller on the same store (all processes
 * included) and at the store's clock (the local clock for SQLite, the Redis
 * server's `TIME` for Redis). The TTL is fixed when the store is opened.
 *
 * Every write resolves only once durable. Results that refuse the caller
 * (`held`, `lost`, `exhausted`) are ordinary values; the service maps them to
 * status codes. A rejection is an infrastructure failure, normally
 * a StoreFailure (storage/store-failure.ts: UNAVAILABLE or RESOURCE_EXHAUSTED;
 * it says when a write may have been applied), anything else INTERNAL.
 */
export interface SessionLeaseStore {
  /**
   * Grants the lease on `sessionId` to `owner`: a takeover when free or
   * expired (new token, strictly greater than any earlier one for the id), a
   * refresh when `owner` already holds it live (same token), `held` when
   * another owner holds it live.
   */
  acquire(sessionId: string, owner: string): Promise<AcquireResult>;
  /** Extends the live lease `owner` holds with `token` (uint64); `lost` otherwise. */
  renew(sessionId: string, owner: string, token: bigint): Promise<RenewResult>;
  /** Drops the hold when owner and token match; a no-op (`not-held`) otherwise. */
  release(sessionId: string, owner: string, token: bigint): Promise<ReleaseResult>;
}

/** Converts a `--lease-ttl` in milliseconds (possibly fractional) to whole microseconds, at least 1. */
export function ttlMicros(ttlMs: number): bigint {
  return BigInt(Math.max(1, Math.round(ttlMs * 1000)));
}
