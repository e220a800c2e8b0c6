import type { Lease, SessionLeaseClient } from "../session-lease-client.js";
import { LeaseHeldError } from "../errors.js";
import { LeaseLedger, wallMs } from "./lease-ledger.js";
import type { Violations } from "./model.js";
import type { WorkloadStats } from "./stats.js";

/**
 * One emulated harness process's leases: acquires them, renews each every
 * TTL/3 as the harness's renewer does (TTL read from the granted expiry,
 * wire-contract.md section 4.3), releases them, or abandons them all at once
 * to emulate a crash. Every step is written to the shared {@link LeaseLedger}.
 */
export class LeaseKeeper {
  private readonly held = new Map<string, { lease: Lease; timer: NodeJS.Timeout }>();
  private dead = false;

  constructor(
    private readonly client: SessionLeaseClient,
    readonly owner: string,
    private readonly ledger: LeaseLedger,
    private readonly stats: WorkloadStats,
    private readonly violations: Violations,
    /** Called when a renewal finds the lease lost; the holder must stop using it. */
    private readonly onLost: (sessionId: string) => void = () => undefined,
  ) {}

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
      const lease = await this.tryAcquire(sessionId);
      if (lease !== undefined) return lease;
      await new Promise((r) => setTimeout(r, pollMs));
    }
    return undefined;
  }

  /** True while `sessionId` is held and its renewals succeed. */
  holds(sessionId: string): boolean {
    return this.held.has(sessionId);
  }

  private schedule(lease: Lease): void {
    const ttlMs = Math.max(30, Number(lease.expiry / 1_000_000n) - wallMs());
    const timer = setTimeout(() => void this.renew(lease.sessionId), ttlMs / 3);
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
      this.held.delete(sessionId);
      this.violations.add("leases renew until released", `${this.owner} lost ${sessionId}: ${(err as Error).message}`);
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
    await this.stats.time("SessionLeaseService/Release", 0, () => this.client.release(entry.lease));
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
