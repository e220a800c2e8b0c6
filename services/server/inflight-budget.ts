import { Code, ConnectError } from "@connectrpc/connect";
import type { Gauge } from "prom-client";
import type { CallActivity, MemoryTrimmer } from "./memory-trim.js";

/**
 * Requests and answers up to this many bytes may take budget past callers
 * already waiting (they still count): small calls keep flowing while a
 * large one waits for room (issue 11, small calls not stalled by big ones).
 */
export const SMALL_CALL_BYTES = 64 * 1024;

/**
 * Copies of a message the server may hold at once, so each message byte is
 * charged this many times: a request as received HTTP/2 frames, as the joined
 * message and as the copy handed to the store; an answer as read from the
 * store, encoded, and framed by grpc-js (measured with bench/inflight-burst.ts).
 */
export const HELD_COPIES = 3;

/**
 * The process's memory budget for bytes in flight (`--max-inflight-bytes`,
 * issue 10 deliverable 3; docs/DESIGN.md principle 6): request bytes from the
 * moment their message starts arriving, and answer bytes from the moment they
 * are encoded, until their call ends, each charged {@link HELD_COPIES} times.
 * A call whose bytes do not fit waits up to `waitMs` for room (first come,
 * first served), then fails with RESOURCE_EXHAUSTED; bytes larger than the
 * whole budget fail at once. `onIdle.trimmer` is scheduled whenever the
 * budget empties after holding at least `onIdle.afterBytes` (the server
 * trims its memory at the first idle moment after that, which the trimmer
 * tells from {@link used} and {@link takes}), and cancelled when a message
 * larger than {@link SMALL_CALL_BYTES} takes budget again before it ran.
 */
export class InflightBudget implements CallActivity {
  private usedBytes = 0;
  private takeCount = 0;
  /** Most bytes charged at once since the budget last emptied with a trim scheduled. */
  private highWater = 0;
  /** Takes waiting for room, first come first served: `bytes` and `held` are charges (message bytes × {@link HELD_COPIES}). */
  private readonly waiting: Waiting[] = [];

  /**
   * @param limitBytes the budget in bytes (≥ 1).
   * @param waitMs how long a call waits for room, in milliseconds.
   * @param gauge optional metric set to the bytes charged.
   * @param onIdle optional trimmer scheduled when the budget empties after
   *   holding at least `afterBytes` (charged) since the last time, and
   *   cancelled when a large message takes budget again.
   */
  constructor(
    readonly limitBytes: number,
    readonly waitMs: number,
    private readonly gauge?: Gauge,
    private readonly onIdle?: { afterBytes: number; trimmer: MemoryTrimmer },
  ) {}

  /** Bytes charged now (message bytes × {@link HELD_COPIES}). */
  get used(): number {
    return this.usedBytes;
  }

  /** Times bytes were taken since the budget was made (every call takes some for its request): the trimmer's sign of activity. */
  get takes(): number {
    return this.takeCount;
  }

  /**
   * Takes `bytes` now if they fit (and no one waits, unless they are a small
   * call's). Give them back with {@link release}.
   */
  tryTake(bytes: number): boolean {
    const charge = bytes * HELD_COPIES;
    if (this.usedBytes + charge > this.limitBytes) return false;
    if (this.waiting.length > 0 && bytes > SMALL_CALL_BYTES) return false;
    this.add(charge);
    return true;
  }

  /**
   * Takes `bytes`, waiting up to `waitMs` for room.
   *
   * @param what names the bytes in the error message ("request", "answer").
   * @param heldBytes bytes of the same message already taken (a request of
   *   unknown length taking more as it arrives): with them, `bytes` must
   *   still fit in the whole budget.
   * @throws ConnectError RESOURCE_EXHAUSTED when they (with `heldBytes`) are
   *   larger than the budget, or no room was made within `waitMs`.
   */
  async take(bytes: number, what: string, heldBytes = 0): Promise<void> {
    const charge = bytes * HELD_COPIES;
    const whole = (heldBytes + bytes) * HELD_COPIES;
    if (whole > this.limitBytes) {
      throw new ConnectError(
        `this ${what} of ${heldBytes > 0 ? "at least " : ""}${heldBytes + bytes} bytes needs ${whole} bytes of the server's memory budget for bytes in flight (${HELD_COPIES} copies), more than all of it (--max-inflight-bytes ${this.limitBytes})`,
        Code.ResourceExhausted,
      );
    }
    if (this.tryTake(bytes)) return;
    await new Promise<void>((resolve, reject) => {
      const entry: Waiting = {
        bytes: charge,
        held: heldBytes * HELD_COPIES,
        grant: () => {
          clearTimeout(timer);
          resolve();
        },
        refuse: (err) => {
          clearTimeout(timer);
          reject(err);
        },
      };
      const timer = setTimeout(() => {
        this.waiting.splice(this.waiting.indexOf(entry), 1);
        this.grantWaiting();
        reject(
          new ConnectError(
            `the server's memory budget for bytes in flight is full (--max-inflight-bytes ${this.limitBytes}): this ${what} of ${bytes} bytes waited ${this.waitMs} ms; retry later`,
            Code.ResourceExhausted,
          ),
        );
      }, this.waitMs);
      this.waiting.push(entry);
      this.refuseDeadlocked();
    });
  }

  /**
   * Requests of unknown length take budget as they arrive and wait, holding
   * what they took, when they need more (connect-call-bytes.ts). When the
   * first waiter could not get its bytes even once every call that is not
   * waiting has given back all it holds, the waiters hold each other up and
   * all would be refused only after `waitMs`, one by one (a fresh-eyes run:
   * four 10 MB Connect bodies against 48MB, three refused after 2, 4 and 6 s,
   * "retry later"). The newest waiter that holds bytes is then refused at once
   * instead (its bytes come back as its request is dropped), until the first
   * one can be served.
   */
  private refuseDeadlocked(): void {
    for (;;) {
      const first = this.waiting[0];
      if (first === undefined) return;
      const heldByWaiting = this.waiting.reduce((sum, w) => sum + w.held, 0);
      if (first.bytes + heldByWaiting <= this.limitBytes) return;
      const victim = this.waiting.findLastIndex((w) => w.held > 0);
      if (victim < 0) return;
      const [refused] = this.waiting.splice(victim, 1);
      refused!.refuse(
        new ConnectError(
          `the server's memory budget for bytes in flight (--max-inflight-bytes ${this.limitBytes}) is held by requests of unknown length that each wait for more of it; this one was refused so that another can finish: retry later, or send the request's content-length`,
          Code.ResourceExhausted,
        ),
      );
    }
  }

  /**
   * Takes the bytes of a unary call's answer, whose method has already run.
   * Only a read's answer larger than {@link SMALL_CALL_BYTES} may wait and be
   * refused (as {@link take}): refusing a write's answer would tell the caller
   * RESOURCE_EXHAUSTED, "retry later", for a change that was applied, and a
   * caller that retries would apply it twice (a fresh-eyes run: an Append
   * stored, then refused after 2 s). Any other answer is taken at once, past
   * the budget if need be (small, or bounded by the write's own message).
   *
   * @param read true for a method that changes nothing (`readOnlyMethod`).
   * @throws ConnectError RESOURCE_EXHAUSTED, for a read's large answer only.
   */
  async takeAnswer(bytes: number, read: boolean): Promise<void> {
    if (this.tryTake(bytes)) return;
    if (read && bytes > SMALL_CALL_BYTES) return this.take(bytes, "answer");
    this.add(bytes * HELD_COPIES);
  }

  /** Gives back message bytes taken with {@link tryTake}, {@link take} or {@link takeAnswer}. */
  release(bytes: number): void {
    if (bytes === 0) return;
    this.add(-bytes * HELD_COPIES);
    this.grantWaiting();
    if (this.usedBytes === 0 && this.onIdle !== undefined && this.highWater >= this.onIdle.afterBytes) {
      this.highWater = 0;
      this.onIdle.trimmer.schedule(this);
    }
  }

  private add(charge: number): void {
    // A large message taking budget: a burst goes on, so the idle trim waits.
    if (charge > SMALL_CALL_BYTES * HELD_COPIES) this.onIdle?.trimmer.cancel();
    if (charge > 0) this.takeCount++;
    this.usedBytes += charge;
    this.highWater = Math.max(this.highWater, this.usedBytes);
    this.gauge?.set(this.usedBytes);
  }

  private grantWaiting(): void {
    while (this.waiting.length > 0 && this.usedBytes + this.waiting[0]!.bytes <= this.limitBytes) {
      const next = this.waiting.shift()!;
      this.add(next.bytes);
      next.grant();
    }
    // The next first waiter may be one the others hold up.
    this.refuseDeadlocked();
  }
}

/** A take waiting for room in an {@link InflightBudget}. */
interface Waiting {
  /** The charge it waits for (message bytes × {@link HELD_COPIES}). */
  bytes: number;
  /** The charge its message already holds (a request of unknown length taking more), which it keeps while it waits. */
  held: number;
  grant: () => void;
  refuse: (err: ConnectError) => void;
}
