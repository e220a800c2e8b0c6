import type { Lease, SessionLeaseClient } from "../session-lease-client.js";
import { LeaseHeldError } from "../errors.js";
import { LeaseLedger, wallMs } from "./lease-ledger.js";
import type { Violations } from "./model.js";
import type { WorkloadStats } from "./stats.js";
import { isOutage, OUTAGE_PAUSE_MS } from "./outage.js";
import { MAX_TIMER_MS } from "../../common/flag-parsers.js";

/**
 * One emulated harness process's leases: acquires them, renews each every
 * TTL/3 as the harness's renewer does (TTL read from the granted expiry,
 * wire-contract.md section 4.3), releases them, or abandons them all at once
 * to emulate a crash. Every step is written to the shared {@link LeaseLedger}.
 *
 * When the run expects outages, an Acquire or Renew that fails with
 * UNAVAILABLE is tried again shortly (a Renew only until the lease's expiry),
 * a failed Release is left to expire, and a lease lost after an outage is
 * not a violation (the holder still stops using it); the ledger still checks
 * that no two owners held it at once.
 */
export class LeaseKeeper {
  private readonly held = new Map<string, { lease: Lease; timer: NodeJS.Timeout; outage?: boolean }>();
  private dead = false;

  constructor(
    private readonly client: SessionLeaseClient,
    readonly owner: string,
    private readonly ledger: LeaseLedger,
    private readonly stats: WorkloadStats,
    private readonly violations: Violations,
    /** Called when a renewal finds the lease lost; the holder must stop using it. */
    private readonly onLost: (sessionId: string) => void = () => undefined,
    /** The run expects outages (WorkloadOptions.outages). */
    private readonly outages = false,
  ) {}

  /** True for an error the run expects: an outage while outages are expected. */
  private expected(err: unknown): boolean {
    return this.outages && isOutage(err);
  }

  /**
   * Tries to take `sessionId` once.
   *
   * @returns the lease, or undefined when another owner holds it.
   */
  async tryAcquire(sessionId: string): Promise<Lease | undefined> {
    try {
      const lease = await this.stats.time("SessionLeaseService/Acquire", 0, () => this.client.acquire(sessionId, this.owner), undefined, (e) => e instanceof LeaseHeldError);
      this.ledger.acquired(lease, wallMs());
      if (this.dead) return undefined;
      this.schedule(lease);
      return lease;
    } catch (err) {
      if (err instanceof LeaseHeldError) return undefined;
      throw err;
    }
  }

  /** Acquires `sessionId`, retrying every `pollMs` while another owner holds it, until granted or `stop` aborts. */
  async acquire(sessionId: string, pollMs: number, stop: AbortSignal): Promise<Lease | undefined> {
    while (!stop.aborted && !this.dead) {
      try {
        const lease = await this.tryAcquire(sessionId);
        if (lease !== undefined) return lease;
      } catch (err) {
        if (!this.expected(err)) throw err;
      }
      await new Promise((r) => setTimeout(r, pollMs));
    }
    return undefined;
  }

  /** True while `sessionId` is held: its renewals succeed, or (during an outage) its last known expiry has not passed. */
  holds(sessionId: string): boolean {
    const entry = this.held.get(sessionId);
    return entry !== undefined && wallMs() < Number(entry.lease.expiry / 1_000_000n);
  }

  private schedule(lease: Lease): void {
    const ttlMs = Math.max(30, Number(lease.expiry / 1_000_000n) - wallMs());
    // A TTL of up to 365 days is allowed (--lease-ttl); no Node.js timer waits longer than MAX_TIMER_MS.
    const timer = setTimeout(() => void this.renew(lease.sessionId), Math.min(ttlMs / 3, MAX_TIMER_MS));
    const previous = this.held.get(lease.sessionId);
    if (previous !== undefined) clearTimeout(previous.timer);
    this.held.set(lease.sessionId, { lease, timer });
  }

  private async renew(sessionId: string): Promise<void> {
    const entry = this.held.get(sessionId);
    if (entry === undefined || this.dead) return;
    const sentAt = wallMs();
    try {
      const lease = await this.stats.time("SessionLeaseService/Renew", 0, () => this.client.renew(entry.lease));
      this.ledger.renewed(lease, sentAt);
      if (!this.dead && this.held.get(sessionId) === entry) this.schedule(lease);
    } catch (err) {
      if (this.dead || this.held.get(sessionId) !== entry) return;
      if (this.expected(err)) {
        entry.outage = true;
        if (wallMs() < Number(entry.lease.expiry / 1_000_000n)) {
          entry.timer = setTimeout(() => void this.renew(sessionId), OUTAGE_PAUSE_MS);
          return;
        }
      }
      this.held.delete(sessionId);
      if (!entry.outage) this.violations.add("leases renew until released", `${this.owner} lost ${sessionId}: ${(err as Error).message}`);
      this.onLost(sessionId);
    }
  }

  /** Stops renewing `sessionId` and releases it. */
  async release(sessionId: string): Promise<void> {
    const entry = this.held.get(sessionId);
    if (entry === undefined) return;
    clearTimeout(entry.timer);
    this.held.delete(sessionId);
    this.ledger.released(entry.lease, wallMs());
    try {
      await this.stats.time("SessionLeaseService/Release", 0, () => this.client.release(entry.lease));
    } catch (err) {
      // The lease expires by itself; the ledger already counts it released.
      if (!this.expected(err)) throw err;
    }
  }

  /** Releases every lease still held. */
  async releaseAll(): Promise<void> {
    await Promise.all([...this.held.keys()].map((id) => this.release(id)));
  }

  /** Emulates a crash: stops every renewal without releasing anything. */
  abandon(): void {
    this.dead = true;
    for (const { timer } of this.held.values()) clearTimeout(timer);
    this.held.clear();
  }
}
