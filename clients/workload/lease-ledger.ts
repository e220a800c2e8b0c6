import type { Lease } from "../session-lease-client.js";
import type { Violations } from "./model.js";

/** Client and driver clocks may disagree by this much (milliseconds) before an overlap is called. */
export const CLOCK_TOLERANCE_MS = 50;

/** Wall-clock milliseconds with sub-millisecond resolution. */
export function wallMs(): number {
  return performance.timeOrigin + performance.now();
}

/** One owner's continuous hold of one lease, as the workload saw it. */
interface Hold {
  owner: string;
  token: bigint;
  /** Wall ms when the Acquire answer arrived (after the driver granted it). */
  acquiredAt: number;
  /** Driver's last reported expiry, wall ms. */
  expiresAt: number;
  /** Wall ms when Release was sent, if it was. */
  releasedAt?: number;
  /** Wall ms when each successful Renew was sent. */
  renewsSentAt: number[];
}

/**
 * Every grant, renewal and release of every lease during a run, to check
 * afterwards that no two owners held one lease at once and that tokens rose
 * on every takeover (wire-contract.md section 4.3).
 */
export class LeaseLedger {
  private readonly holds = new Map<string, Hold[]>();

  private current(lease: Lease): Hold | undefined {
    return this.holds.get(lease.sessionId)?.findLast((h) => h.owner === lease.owner && h.token === lease.token);
  }

  /** Records an Acquire answer received at `at`; a same-owner, same-token re-grant continues the hold. */
  acquired(lease: Lease, at: number): void {
    const list = this.holds.get(lease.sessionId) ?? [];
    this.holds.set(lease.sessionId, list);
    const h = this.current(lease);
    if (h !== undefined && h.releasedAt === undefined) {
      h.expiresAt = Number(lease.expiry / 1_000_000n);
      return;
    }
    list.push({ owner: lease.owner, token: lease.token, acquiredAt: at, expiresAt: Number(lease.expiry / 1_000_000n), renewsSentAt: [] });
  }

  /** Records a successful Renew sent at `sentAt`. */
  renewed(lease: Lease, sentAt: number): void {
    const h = this.current(lease);
    if (h === undefined) return;
    h.renewsSentAt.push(sentAt);
    h.expiresAt = Number(lease.expiry / 1_000_000n);
  }

  /** Records a Release sent at `sentAt`. */
  released(lease: Lease, sentAt: number): void {
    const h = this.current(lease);
    if (h !== undefined && h.releasedAt === undefined) h.releasedAt = sentAt;
  }

  /** Number of distinct holds recorded (grants to a new owner or token). */
  get grants(): number {
    let n = 0;
    for (const l of this.holds.values()) n += l.length;
    return n;
  }

  /**
   * Checks every lease: for each later hold `b` by another owner than an
   * earlier hold `a`, `b`'s token is greater, `b` was granted no earlier than
   * `a` ended (its Release, or its last expiry if sooner, within
   * {@link CLOCK_TOLERANCE_MS}), and no Renew of `a` sent after `b`'s grant
   * succeeded.
   */
  check(violations: Violations): void {
    for (const [id, list] of this.holds) {
      const byTime = [...list].sort((x, y) => x.acquiredAt - y.acquiredAt);
      for (let j = 1; j < byTime.length; j++) {
        const b = byTime[j]!;
        for (let i = 0; i < j; i++) {
          const a = byTime[i]!;
          if (a.owner === b.owner) continue;
          if (b.token <= a.token) violations.add("lease tokens rise on takeover", `${id}: ${b.owner} got token ${b.token} after ${a.owner} held ${a.token}`);
          const end = Math.min(a.releasedAt ?? Infinity, a.expiresAt - CLOCK_TOLERANCE_MS);
          if (b.acquiredAt < end) violations.add("no two owners hold one lease", `${id}: ${b.owner} was granted ${(end - b.acquiredAt).toFixed(0)} ms before ${a.owner}'s hold ended`);
          const late = a.renewsSentAt.find((t) => t > b.acquiredAt);
          if (late !== undefined) violations.add("no two owners hold one lease", `${id}: ${a.owner} renewed ${(late - b.acquiredAt).toFixed(0)} ms after ${b.owner} was granted it`);
        }
      }
    }
  }
}
