/** Slots of a {@link WriteClaims} table: writes tracked at once (256 KiB of shared memory). */
export const WRITE_SLOTS = 65536;

const QUEUED = 1;
const STARTED = 2;
const CANCELLED = 3;

/** What {@link WriteClaims.cancel} found: see there. */
export type CancelOutcome = "cancelled" | "started" | "answered";

/**
 * Who decides a queued SQLite write's fate when its `--store-timeout` runs
 * out: the main thread (the caller is answered "nothing was written" and the
 * write never runs) or the writer worker (it has started the write, which
 * may still commit). Wire-contract's rule that an answer matches what is
 * stored (docs/DESIGN.md principle 1): without this the main thread, whose
 * timer cannot see the worker's queue, answered "it may still be committed"
 * for writes that were still waiting unstarted, the common case once group
 * commits are bounded (issue 11).
 *
 * A table of Int32 slots in shared memory, used by both threads with atomic
 * compare-and-exchange. A write of id `id` uses slot `id % WRITE_SLOTS`,
 * whose value is `0` when free, else the id's low 30 bits times 4 plus its
 * state: queued (the main thread sent it), started (the worker is running
 * it), cancelled (the main thread gave up on it before it started). The id
 * bits keep a late decision from touching the slot's next write. A write
 * whose slot is still taken by an older one is untracked (`-1`): it is
 * answered as before, "it may still be committed".
 */
export class WriteClaims {
  readonly states: Int32Array;

  /** @param memory the shared table (a new one, {@link WRITE_SLOTS} slots, when omitted). */
  constructor(memory: SharedArrayBuffer = new SharedArrayBuffer(4 * WRITE_SLOTS)) {
    this.states = new Int32Array(memory);
  }

  /** The shared memory, to hand to the worker. */
  get memory(): SharedArrayBuffer {
    return this.states.buffer as SharedArrayBuffer;
  }

  /** Main thread, when a write is sent: its slot, or -1 when the slot is taken (untracked). */
  queue(id: number): number {
    const slot = id % WRITE_SLOTS;
    return Atomics.compareExchange(this.states, slot, 0, tag(id) | QUEUED) === 0 ? slot : -1;
  }

  /**
   * Main thread, at the write's deadline: tries to cancel it. Returns
   * `cancelled` when it had not started and now never will (the worker frees
   * its slot when it reaches it); `started` when the worker is running it,
   * or when it is untracked (slot -1: nothing is known, so it may have
   * started); `answered` when the worker has already answered it and freed
   * its slot (its answer is on its way to the main thread and says what
   * happened: run, failed, or dropped unstarted).
   */
  cancel(id: number, slot: number): CancelOutcome {
    if (slot < 0) return "started";
    const seen = Atomics.compareExchange(this.states, slot, tag(id) | QUEUED, tag(id) | CANCELLED);
    if (seen === (tag(id) | QUEUED)) return "cancelled";
    return seen === (tag(id) | STARTED) ? "started" : "answered";
  }

  /** Worker, just before it runs the write: false when the main thread cancelled it (it must not run). Untracked writes always start. */
  start(id: number, slot: number): boolean {
    return slot < 0 || Atomics.compareExchange(this.states, slot, tag(id) | QUEUED, tag(id) | STARTED) === (tag(id) | QUEUED);
  }

  /** Worker, once the write was answered (run, failed, dropped or cancelled): frees its slot. */
  release(id: number, slot: number): void {
    // The only change the main thread can make meanwhile to this id's slot is queued → cancelled, which this overrides.
    if (slot >= 0 && Atomics.load(this.states, slot) >>> 2 === tag(id) >>> 2) Atomics.store(this.states, slot, 0);
  }
}

/** The id bits stored in a slot: the low 30 bits of `id`, shifted past the state. */
function tag(id: number): number {
  return (id & 0x3fffffff) << 2;
}
