import { hostname } from "node:os";
import { randomBytes } from "node:crypto";
import { SnapshotBuilder, turnEvents, type Random } from "./content.js";
import { LeaseKeeper } from "./lease-keeper.js";
import { digest, ViolationFound, type SessionModel, type Slot } from "./model.js";
import { SessionNotFoundError } from "../errors.js";
import { throughOutages, writeThroughOutages, type WriteFound } from "./outage.js";
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
    if (lease !== undefined) this.keeper = new LeaseKeeper(lease, this.owner, ctx.leases, ctx.stats, ctx.violations, (id) => this.lost.add(id), ctx.options.outages);
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
        if (!(err instanceof ViolationFound)) this.ctx.violations.add("no unexpected errors", `${this.owner} ${session?.id ?? state.slot.name}: ${(err as Error).message}`);
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
      const loaded = await throughOutages(this.ctx, () => this.ctx.stats.time("SessionStoreService/Load", 0, () => this.ctx.sessionStore.load(current.id), (s) => s.payload.byteLength));
      if (current.snapshot !== undefined && digest(loaded.payload) !== current.snapshot.digest) {
        this.ctx.violations.add("acknowledged snapshots are readable", `${current.id}: after takeover Load returned ${loaded.payload.byteLength} bytes, not the snapshot of turn ${current.snapshot.turn}`);
      }
      return current;
    }
    const id = `${this.ctx.options.runId}-${state.slot.name}-${++state.opened}`;
    if (this.keeper !== undefined && (await this.keeper.acquire(id, 100, this.halt.signal)) === undefined) return undefined;
    const builder = new SnapshotBuilder(id);
    const payload = builder.encode();
    const d = digest(payload);
    this.expectApplied(
      id,
      await writeThroughOutages(
        this.ctx,
        () => this.ctx.stats.time("SessionStoreService/Create", payload.byteLength, () => this.ctx.sessionStore.create(id, payload)),
        () => this.findSnapshot(id, d, undefined),
      ),
    );
    state.builder = builder;
    const session = state.slot.open(id);
    session.snapshot = { digest: d, bytes: payload.byteLength, turn: 0 };
    return session;
  }

  /** Records the violation and ends the session when a write whose answer was lost was found neither applied nor absent. */
  private expectApplied(sessionId: string, found: WriteFound): void {
    if (found === "applied") return;
    this.ctx.violations.add("no write applied twice", `${sessionId}: ${found}`);
    throw new ViolationFound(found);
  }

  /** Whether the snapshot `want` (a digest) is what Load returns, or still `before` (absent: undefined means no session). */
  private async findSnapshot(sessionId: string, want: string, before: string | undefined): Promise<WriteFound> {
    let got: string | undefined;
    try {
      got = digest((await this.ctx.sessionStore.load(sessionId)).payload);
    } catch (err) {
      if (!(err instanceof SessionNotFoundError)) throw err;
    }
    if (got === want) return "applied";
    if (got === before) return "absent";
    return `after a lost answer Load returned ${got === undefined ? "nothing" : "a snapshot"} that is neither the one sent nor the one before`;
  }

  /** Whether the event `want` (a digest) is the one record after the session's last acknowledged event; sets its cursor in `found`. */
  private async findEvent(session: SessionModel, want: string, found: { cursor: string }): Promise<WriteFound> {
    const after = [];
    for await (const r of this.ctx.eventLog!.readAfter(session.id, { cursor: session.lastCursor })) after.push(r);
    if (after.length === 0) return "absent";
    const [first] = after;
    if (after.length === 1 && first!.kind === "event" && digest(first!.payload) === want) {
      found.cursor = first!.cursor;
      return "applied";
    }
    const copies = after.filter((r) => r.kind === "event" && digest(r.payload) === want).length;
    return `after a lost answer the log holds ${after.length} records past event ${session.events.length}, ${copies} of them the event appended once`;
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
        const d = digest(bytes);
        const at = { cursor: "" };
        const append = async () => void (at.cursor = await this.ctx.stats.time("EventLogService/Append", bytes.byteLength, () => log.append(session.id, bytes)));
        this.expectApplied(session.id, await writeThroughOutages(this.ctx, append, () => this.findEvent(session, d, at)));
        session.lastCursor = at.cursor;
        session.ackEvent({ seq: session.events.length + 1, digest: d, bytes: bytes.byteLength, sentAt });
      }
    }
    builder.addTurn(events);
    const payload = builder.encode();
    const d = digest(payload);
    const save = () => this.ctx.stats.time("SessionStoreService/Save", payload.byteLength, () => this.ctx.sessionStore.save(session.id, payload));
    this.expectApplied(session.id, await writeThroughOutages(this.ctx, save, () => this.findSnapshot(session.id, d, session.snapshot?.digest)));
    session.snapshot = { digest: d, bytes: payload.byteLength, turn: builder.turns };
  }
}
