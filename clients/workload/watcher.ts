import { CursorExpiredError } from "../errors.js";
import type { EventLogClient } from "../event-log-client.js";
import type { WorkloadContext } from "./context.js";
import { digest, type SessionModel, type Slot } from "./model.js";
import type { Random } from "./content.js";

const CHECK = "watchers see every event exactly once, in order";

/** What a watcher received of one session, in arrival order. */
interface Seen {
  seq: number;
  digest: string;
  receivedAt: number;
}

/**
 * A follower as a harness UI or relay runs one (wire-contract.md section
 * 3.6): it follows a slot's sessions one after another with ReadAfter
 * (follow), drops its stream every few seconds and resumes from the last
 * cursor it got, and also resumes after stream errors such as UNAVAILABLE or
 * `follow_lagging`. Once a session is finished and fully received it checks
 * that it saw every acknowledged event exactly once, in order, then moves to
 * the slot's next session.
 */
export class Watcher {
  /** Streams dropped on purpose and resumed from a cursor. */
  reconnects = 0;
  /** Streams that ended with an error and were resumed from a cursor. */
  resumes = 0;

  constructor(
    private readonly ctx: WorkloadContext,
    private readonly log: EventLogClient,
    readonly name: string,
    private readonly slot: Slot,
    private readonly rng: Random,
    /** Aborts when every writer has stopped. */
    private readonly writersDone: AbortSignal,
    /** Wall ms after which a watcher still behind gives up (set when the writers stop). */
    private readonly drainDeadline: () => number,
  ) {}

  /** Follows the slot's sessions until the writers are done and everything is received. */
  async run(): Promise<void> {
    let session: SessionModel | undefined;
    while ((session = await this.slot.next(session, this.writersDone)) !== undefined) {
      await this.follow(session);
    }
  }

  private caughtUp(session: SessionModel, seen: readonly Seen[]): boolean {
    return session.finished && seen.length >= session.events.length;
  }

  private async follow(session: SessionModel): Promise<void> {
    const seen: Seen[] = [];
    let cursor = "";
    let broken = false;
    while (!session.tainted && !this.caughtUp(session, seen)) {
      if (Date.now() > this.drainDeadline()) {
        this.ctx.violations.add(CHECK, `${this.name} on ${session.id}: received ${seen.length} of ${session.events.length} events before the drain deadline`);
        return;
      }
      const ac = new AbortController();
      const period = this.ctx.options.reconnectMs;
      const timer = period > 0 ? setTimeout(() => (this.reconnects++, ac.abort()), period * (0.5 + this.rng.next())) : undefined;
      const watchDone = this.stopWhenCaughtUp(session, seen, ac);
      try {
        for await (const r of this.log.readAfter(session.id, { cursor, follow: true, signal: ac.signal })) {
          cursor = r.cursor;
          if (r.kind === "gap") {
            this.ctx.violations.add(CHECK, `${this.name} on ${session.id}: a gap (${r.reason}) where none was appended`);
            continue;
          }
          const seq = (JSON.parse(Buffer.from(r.payload).toString("utf8")) as { seq?: number }).seq;
          if (!broken && seq !== seen.length + 1) {
            broken = true;
            this.ctx.violations.add(CHECK, `${this.name} on ${session.id}: got event ${seq} after ${seen.length} (${seq !== undefined && seq <= seen.length ? "repeated" : "skipped"})`);
          }
          seen.push({ seq: seq ?? -1, digest: digest(r.payload), receivedAt: performance.now() });
        }
      } catch (err) {
        if (err instanceof CursorExpiredError) {
          this.ctx.violations.add(CHECK, `${this.name} on ${session.id}: cursor expired though the log was never reset`);
          return;
        }
        this.resumes++;
        await new Promise((r) => setTimeout(r, 100));
      } finally {
        clearTimeout(timer);
        ac.abort();
        await watchDone;
      }
    }
    if (!session.tainted && !broken) this.compare(session, seen);
  }

  /** Aborts the stream once the session is finished and fully received. */
  private async stopWhenCaughtUp(session: SessionModel, seen: readonly Seen[], ac: AbortController): Promise<void> {
    const aborted = new Promise((r) => ac.signal.addEventListener("abort", r, { once: true }));
    while (!ac.signal.aborted) {
      if (this.caughtUp(session, seen)) return ac.abort();
      await Promise.race([session.changed(), new Promise((r) => setTimeout(r, 200)), aborted]);
    }
  }

  /** Checks the received events against the acknowledged ones and records append-to-delivery lag. */
  private compare(session: SessionModel, seen: readonly Seen[]): void {
    if (seen.length !== session.events.length) {
      this.ctx.violations.add(CHECK, `${this.name} on ${session.id}: received ${seen.length} events, ${session.events.length} were acknowledged`);
      return;
    }
    for (let i = 0; i < seen.length; i++) {
      const got = seen[i]!;
      const acked = session.events[i]!;
      if (got.digest !== acked.digest) {
        this.ctx.violations.add(CHECK, `${this.name} on ${session.id}: event ${i + 1} differs from what was appended`);
        return;
      }
      this.ctx.stats.sample("follow delivery (append sent to record received)", Math.max(0, got.receivedAt - acked.sentAt), acked.bytes);
    }
  }
}
