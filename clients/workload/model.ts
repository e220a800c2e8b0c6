import { createHash } from "node:crypto";

/** A short content digest (hex SHA-256, first 16 bytes) used to compare what was acknowledged with what is read back. */
export function digest(bytes: Uint8Array | string): string {
  return createHash("sha256").update(bytes).digest("hex").slice(0, 32);
}

/** An event the driver acknowledged: its sequence number in the session, digest, size, and when its Append was sent. */
export interface AckedEvent {
  seq: number;
  digest: string;
  bytes: number;
  /** `performance.now()` when the Append was sent, to measure follow delivery lag. */
  sentAt: number;
}

/**
 * What the workload knows was acknowledged for one session: the last saved
 * snapshot and every appended event, in order. The final checks compare the
 * store and the watchers against this.
 */
export class SessionModel {
  snapshot?: { digest: string; bytes: number; turn: number };
  readonly events: AckedEvent[] = [];
  /** True once its writer is done with it (rotated or the run ended). */
  finished = false;
  /** True when a write failed, so what the store holds is unknown: checks skip the session. */
  tainted = false;
  /** Cursor of the last acknowledged event ("" before the first): where to look for an append whose answer was lost. */
  lastCursor = "";
  /** Notified on every acked event and when the session finishes. */
  private waiters: Array<() => void> = [];

  constructor(
    readonly id: string,
    readonly slot: string,
  ) {}

  /** Records an acknowledged append. */
  ackEvent(e: AckedEvent): void {
    this.events.push(e);
    this.wake();
  }

  /** Marks the session done and wakes anyone waiting on it. */
  finish(): void {
    this.finished = true;
    this.wake();
  }

  /** Resolves at the next ack or finish. */
  changed(): Promise<void> {
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }
}

/**
 * A slot is one of a harness process's concurrent conversations: it holds one
 * session at a time and moves to a new session when the snapshot grows past
 * the size cap. Watchers follow slots.
 */
export class Slot {
  readonly sessions: SessionModel[] = [];
  private waiters: Array<() => void> = [];

  constructor(readonly name: string) {}

  /** The session the slot currently writes, if any. */
  get current(): SessionModel | undefined {
    return this.sessions.at(-1);
  }

  /** Starts a new session in this slot. */
  open(id: string): SessionModel {
    const s = new SessionModel(id, this.name);
    this.sessions.push(s);
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
    return s;
  }

  /** Resolves when the slot opens a session after `after` (or has one already). */
  async next(after: SessionModel | undefined, stop: AbortSignal): Promise<SessionModel | undefined> {
    for (;;) {
      const i = after === undefined ? 0 : this.sessions.indexOf(after) + 1;
      if (i < this.sessions.length) return this.sessions[i];
      if (stop.aborted) return undefined;
      await new Promise<void>((resolve) => {
        const done = () => {
          stop.removeEventListener("abort", done);
          resolve();
        };
        this.waiters.push(done);
        stop.addEventListener("abort", done, { once: true });
      });
    }
  }
}

/** Every invariant a run checks, in report order. */
export const CHECKS = [
  "acknowledged snapshots are readable",
  "acknowledged events are readable, in order",
  "no write applied twice",
  "watchers see every event exactly once, in order",
  "no slot fires twice",
  "the store counted every claim and fire",
  "no two owners hold one lease",
  "lease tokens rise on takeover",
  "leases renew until released",
  "no unexpected errors",
] as const;

/** One of {@link CHECKS}. */
export type Check = (typeof CHECKS)[number];

/**
 * Thrown by a writer that found (and recorded) a violation that ends its
 * session, so the failure is not reported a second time as unexpected.
 */
export class ViolationFound extends Error {
  override name = "ViolationFound";
}

/** An invariant the run broke, or an unexpected failure. */
export interface Violation {
  check: Check;
  detail: string;
}

/** Collected violations; a run with any exits non-zero. */
export class Violations {
  readonly list: Violation[] = [];
  private readonly counts = new Map<Check, number>();

  /** Records one violation (the first 20 per check keep their detail). */
  add(check: Check, detail: string): void {
    const n = (this.counts.get(check) ?? 0) + 1;
    this.counts.set(check, n);
    if (n <= 20) this.list.push({ check, detail });
  }

  /** How many violations `check` had. */
  count(check: Check): number {
    return this.counts.get(check) ?? 0;
  }

  get total(): number {
    let n = 0;
    for (const c of this.counts.values()) n += c;
    return n;
  }
}
