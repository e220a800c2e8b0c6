/**
 * The session lease rules of wire-contract.md section 4.3, as pure functions:
 * the stored slot of one session id and the current time go in, a decision
 * (the result for the caller plus the slot to write back, if any) comes out.
 *
 * This file is the single specification of the rules. The SQLite store calls
 * these functions inside one write operation of its worker (one immediate
 * transaction). The Redis store cannot run TypeScript inside Redis, so
 * `lease-lua.ts` carries a line-by-line Lua transcription of the same
 * decision table; `test/unit/session-lease-rules.test.ts` runs one table of
 * cases through both and requires identical decisions, so they cannot drift.
 *
 * Units: times are integer microseconds since the Unix epoch (bigint), the
 * finest unit both clocks give (Redis `TIME` reports microseconds) and one a
 * Lua double still holds exactly (see {@link MAX_LEASE_TTL_MS}). Tokens are
 * uint64 (bigint), as on the wire.
 */

/** Largest fencing token the wire can carry: 2^64 - 1 (`uint64 token`, section 4.2). */
export const MAX_LEASE_TOKEN = (1n << 64n) - 1n;

/**
 * Longest accepted `--lease-ttl`, in milliseconds (365 days). Expiry is
 * computed as now + TTL in microseconds; keeping the TTL this small keeps the
 * sum far below 2^53, where Lua's doubles stop being exact integers.
 */
export const MAX_LEASE_TTL_MS = 365 * 24 * 3600 * 1000;

/** A lease currently recorded for a session id (it may have expired). */
export interface LeaseHold {
  /** Opaque owner string as the holder sent it. */
  owner: string;
  /** Fencing token granted to this hold, 1 ..= {@link MAX_LEASE_TOKEN}. */
  token: bigint;
  /** End of the lease, microseconds since the Unix epoch; live while now < expiryUs. */
  expiryUs: bigint;
}

/**
 * Everything stored for one session id: the current hold, if any, and the
 * highest token ever granted for the id (0 before the first grant). The
 * high-water mark outlives the hold: Release clears `hold` only, so a later
 * takeover is still strictly greater (section 4.3).
 */
export interface LeaseSlot {
  hold: LeaseHold | undefined;
  highWater: bigint;
}

/** The clock a decision is made at: current time and the server's TTL, both in microseconds. */
export interface LeaseClock {
  nowUs: bigint;
  ttlUs: bigint;
}

/** Why Renew found the caller's lease gone (all three answer FAILED_PRECONDITION). */
export type LeaseLossReason = "no-lease" | "other-holder" | "expired";

/** A successful Acquire or Renew: the hold the caller now has. */
export interface LeaseGranted {
  outcome: "granted";
  hold: LeaseHold;
}

/** Result of Acquire: granted, held by a live other owner, or out of tokens. */
export type AcquireResult = LeaseGranted | { outcome: "held" } | { outcome: "exhausted" };

/** Result of Renew: granted (same token, new expiry) or lost. */
export type RenewResult = LeaseGranted | { outcome: "lost"; why: LeaseLossReason };

/** Result of Release: the caller's hold was dropped, or it held nothing (still OK). */
export type ReleaseResult = { outcome: "released" } | { outcome: "not-held" };

/**
 * A decision: the result for the caller and the slot to store afterwards
 * (`next` undefined means nothing changes, so nothing is written).
 */
export interface LeaseDecision<R> {
  result: R;
  next: LeaseSlot | undefined;
}

function isLive(hold: LeaseHold | undefined, nowUs: bigint): hold is LeaseHold {
  return hold !== undefined && nowUs < hold.expiryUs;
}

/**
 * Extends a hold that stays with its holder to now + TTL, but never moves an
 * expiry backwards (a clock step back or a replica with a shorter TTL does not
 * cut short what the holder was already promised).
 */
function refreshed(hold: LeaseHold, clock: LeaseClock): LeaseHold {
  const expiryUs = clock.nowUs + clock.ttlUs;
  return { owner: hold.owner, token: hold.token, expiryUs: expiryUs > hold.expiryUs ? expiryUs : hold.expiryUs };
}

/**
 * Acquire(session_id, owner), section 4.3:
 * - live hold by the same owner: re-grant with the same token and a refreshed expiry;
 * - live hold by another owner: `held` (the service answers FAILED_PRECONDITION);
 * - no hold, or an expired one (even the caller's own): takeover with token
 *   high-water + 1 and expiry now + TTL; `exhausted` (RESOURCE_EXHAUSTED) when
 *   the high-water mark is already {@link MAX_LEASE_TOKEN}.
 */
export function decideAcquire(slot: LeaseSlot, owner: string, clock: LeaseClock): LeaseDecision<AcquireResult> {
  const hold = slot.hold;
  if (isLive(hold, clock.nowUs)) {
    if (hold.owner !== owner) return { result: { outcome: "held" }, next: undefined };
    const kept = refreshed(hold, clock);
    return { result: { outcome: "granted", hold: kept }, next: { hold: kept, highWater: slot.highWater } };
  }
  if (slot.highWater >= MAX_LEASE_TOKEN) return { result: { outcome: "exhausted" }, next: undefined };
  const token = slot.highWater + 1n;
  const taken: LeaseHold = { owner, token, expiryUs: clock.nowUs + clock.ttlUs };
  return { result: { outcome: "granted", hold: taken }, next: { hold: taken, highWater: token } };
}

/**
 * Renew(lease), section 4.3: succeeds only while a hold exists with the same
 * owner and token and has not expired; keeps the token and refreshes the
 * expiry. Otherwise `lost` with the reason, and nothing changes. The request's
 * expiry plays no part.
 */
export function decideRenew(slot: LeaseSlot, owner: string, token: bigint, clock: LeaseClock): LeaseDecision<RenewResult> {
  const hold = slot.hold;
  if (hold === undefined) return { result: { outcome: "lost", why: "no-lease" }, next: undefined };
  if (hold.owner !== owner || hold.token !== token) return { result: { outcome: "lost", why: "other-holder" }, next: undefined };
  if (!isLive(hold, clock.nowUs)) return { result: { outcome: "lost", why: "expired" }, next: undefined };
  const kept = refreshed(hold, clock);
  return { result: { outcome: "granted", hold: kept }, next: { hold: kept, highWater: slot.highWater } };
}

/**
 * Release(lease), section 4.3: drops the hold only when owner and token both
 * match (expired or not); anything else is a no-op. The high-water mark stays.
 */
export function decideRelease(slot: LeaseSlot, owner: string, token: bigint): LeaseDecision<ReleaseResult> {
  const hold = slot.hold;
  if (hold === undefined || hold.owner !== owner || hold.token !== token) return { result: { outcome: "not-held" }, next: undefined };
  return { result: { outcome: "released" }, next: { hold: undefined, highWater: slot.highWater } };
}
