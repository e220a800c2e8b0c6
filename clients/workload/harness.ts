import { hostname } from "node:os";
import { randomBytes } from "node:crypto";
import { SnapshotBuilder, turnEvents, type Random } from "./content.js";
import { LeaseKeeper } from "./lease-keeper.js";
import { digest, type SessionModel, type Slot } from "./model.js";
import type { WorkloadContext } from "./context.js";
import type { SchedulerCandidate } from "./scheduler.js";

/** A slot's writer state, handed from a crashed process to its successor. */
export interface SlotState {
  slot: Slot;
  rng: Random;
  builder?: SnapshotBuilder;
  /** Sessions opened in this slot so far (names the next one). */
  opened: number;
}

/** Builds the owner id a harness process uses: `<hostname>-<pid>-<process>.<generation>-<nonce>`, as the harness does. */
export function ownerId(index: number, generation: number): string {
  return `${hostname()}-${process.pid}-w${index}.${generation}-${randomBytes(3).toString("hex")}`;
}

/**
 * One emulated harness process (wire-contract.md sections 2 to 4 as the
 * harness uses them): it takes an owner id, and for each of its slots
 * acquires the session's lease (renewed every TTL/3), creates the session,
 * then per turn appends the turn's events and saves the grown snapshot. When a
 * snapshot passes the size cap it releases the session and starts another.
 * A "crash" stops it between turns without releasing anything; its
 * successor takes the same slots over once the leases expire, first checking
 * that the last acknowledged snapshot is what Load returns.
 */
export class HarnessProcess {
  readonly owner: string;
  private readonly keeper?: LeaseKeeper;
  private crashing = false;
  /** Aborts when the run stops or this process crashes. */
  private readonly halt = new AbortController();
  private readonly lost = new Set<string>();
  /** Resolves when every slot loop (and the scheduler candidate) has stopped. */
  done: Promise<void> = Promise.resolve();

  constructor(
    private readonly ctx: WorkloadContext,
    readonly index: number,
    readonly generation: number,
    private readonly slots: SlotState[],
    private readonly scheduler?: (keeper: LeaseKeeper, crashed: () => boolean) => SchedulerCandidate,
  ) {
    this.owner = ownerId(index, generation);
    const lease = ctx.sessionLease;
    if (lease !== undefined) this.keeper = new LeaseKeeper(lease, this.owner, ctx.leases, ctx.stats, ctx.violations, (id) => this.lost.add(id));
  }

  /** Starts the slot loops and the scheduler candidate. */
  start(): void {
    const onStop = () => this.halt.abort();
    if (this.ctx.stop.aborted) onStop();
    else this.ctx.stop.addEventListener("abort", onStop, { once: true });
    const loops = this.slots.map((s) => this.runSlot(s));
    const candidate = this.keeper !== undefined ? this.scheduler?.(this.keeper, () => this.crashing) : undefined;
    if (candidate !== undefined) loops.push(candidate.run());
    this.done = Promise.all(loops).then(async () => {
      this.ctx.stop.removeEventListener("abort", onStop);
      if (this.crashing) this.keeper?.abandon();
      else await this.keeper?.releaseAll();
    });
  }

  /** Emulates a crash: every slot stops after its current turn and nothing is released. */
  crash(): Promise<void> {
    this.crashing = true;
    this.halt.abort();
    return this.done;
  }

  private get stopping(): boolean {
    return this.halt.signal.aborted;
  }

  private async runSlot(state: SlotState): Promise<void> {
    while (!this.stopping) {
      let session: SessionModel | undefined;
      try {
        session = await this.takeSession(state);
        if (session === undefined) return;
        while (!this.stopping && !this.lost.has(session.id) && (state.builder?.size ?? 0) < this.ctx.options.maxSnapshotBytes) {
          await this.turn(state, session);
          if (this.ctx.options.turnPauseMs > 0) await new Promise((r) => setTimeout(r, this.ctx.options.turnPauseMs));
        }
        if (this.crashing) return;
        session.finish();
        state.builder = undefined;
        await this.keeper?.release(session.id);
      } catch (err) {
        this.ctx.violations.add("no unexpected errors", `${this.owner} ${session?.id ?? state.slot.name}: ${(err as Error).message}`);
        if (session !== undefined) {
          session.tainted = true;
          session.finish();
          state.builder = undefined;
          await this.keeper?.release(session.id).catch(() => undefined);
        }
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  }

  /** The slot's unfinished session taken over after a crash, or a new one; undefined when stopping. */
  private async takeSession(state: SlotState): Promise<SessionModel | undefined> {
    const current = state.slot.current;
    if (current !== undefined && !current.finished && state.builder !== undefined) {
      if (this.keeper !== undefined && (await this.keeper.acquire(current.id, 100, this.halt.signal)) === undefined) return undefined;
      const loaded = await this.ctx.stats.time("SessionStoreService/Load", 0, () => this.ctx.sessionStore.load(current.id), (s) => s.payload.byteLength);
      if (current.snapshot !== undefined && digest(loaded.payload) !== current.snapshot.digest) {
        this.ctx.violations.add("acknowledged snapshots are readable", `${current.id}: after takeover Load returned ${loaded.payload.byteLength} bytes, not the snapshot of turn ${current.snapshot.turn}`);
      }
      return current;
    }
    const id = `${this.ctx.options.runId}-${state.slot.name}-${++state.opened}`;
    if (this.keeper !== undefined && (await this.keeper.acquire(id, 100, this.halt.signal)) === undefined) return undefined;
    const builder = new SnapshotBuilder(id);
    const payload = builder.encode();
    await this.ctx.stats.time("SessionStoreService/Create", payload.byteLength, () => this.ctx.sessionStore.create(id, payload));
    state.builder = builder;
    const session = state.slot.open(id);
    session.snapshot = { digest: digest(payload), bytes: payload.byteLength, turn: 0 };
    return session;
  }

  /** One turn: append its events in order, then save the grown snapshot. */
  private async turn(state: SlotState, session: SessionModel): Promise<void> {
    const builder = state.builder!;
    const every = this.ctx.options.mediaEvery;
    const events = turnEvents(state.rng, session.id, builder.turns + 1, session.events.length + 1, every > 0 && (builder.turns + 1) % every === 0);
    const log = this.ctx.eventLog;
    if (log !== undefined) {
      for (const e of events) {
        const bytes = new TextEncoder().encode(e.json);
        const sentAt = performance.now();
        await this.ctx.stats.time("EventLogService/Append", bytes.byteLength, () => log.append(session.id, bytes));
        session.ackEvent({ seq: session.events.length + 1, digest: digest(bytes), bytes: bytes.byteLength, sentAt });
      }
    }
    builder.addTurn(events);
    const payload = builder.encode();
    await this.ctx.stats.time("SessionStoreService/Save", payload.byteLength, () => this.ctx.sessionStore.save(session.id, payload));
    session.snapshot = { digest: digest(payload), bytes: payload.byteLength, turn: builder.turns };
  }
}
