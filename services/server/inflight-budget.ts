import { Code, ConnectError } from "@connectrpc/connect";
import type { Gauge } from "prom-client";

/**
 * Requests and answers up to this many bytes may take budget past callers
 * already waiting (they still count): small calls keep flowing while a
 * large one waits for room (issue 11, small calls not stalled by big ones).
 */
export const SMALL_CALL_BYTES = 64 * 1024;

/**
 * The process's memory budget for bytes in flight (`--max-inflight-bytes`,
 * issue 10 deliverable 3; DESIGN.md principle 6): request bytes from the
 * moment their message starts arriving, and answer bytes from the moment they
 * are encoded, until their call ends. A call whose bytes do not fit waits up
 * to `waitMs` for room (first come, first served), then fails with
 * RESOURCE_EXHAUSTED; bytes larger than the whole budget fail at once.
 */
export class InflightBudget {
  private usedBytes = 0;
  private readonly waiting: Array<{ bytes: number; grant: () => void }> = [];

  /**
   * @param limitBytes the budget in bytes (≥ 1).
   * @param waitMs how long a call waits for room, in milliseconds.
   * @param gauge optional metric set to the bytes in use.
   */
  constructor(
    readonly limitBytes: number,
    readonly waitMs: number,
    private readonly gauge?: Gauge,
  ) {}

  /** Bytes taken now. */
  get used(): number {
    return this.usedBytes;
  }

  /**
   * Takes `bytes` now if they fit (and no one waits, unless they are a small
   * call's). Give them back with {@link release}.
   */
  tryTake(bytes: number): boolean {
    if (this.usedBytes + bytes > this.limitBytes) return false;
    if (this.waiting.length > 0 && bytes > SMALL_CALL_BYTES) return false;
    this.add(bytes);
    return true;
  }

  /**
   * Takes `bytes`, waiting up to `waitMs` for room.
   *
   * @param what names the bytes in the error message ("request", "answer").
   * @throws ConnectError RESOURCE_EXHAUSTED when they are larger than the
   *   budget, or no room was made within `waitMs`.
   */
  async take(bytes: number, what: string): Promise<void> {
    if (bytes > this.limitBytes) {
      throw new ConnectError(`this ${what} of ${bytes} bytes is larger than the server's memory budget for bytes in flight (--max-inflight-bytes ${this.limitBytes})`, Code.ResourceExhausted);
    }
    if (this.tryTake(bytes)) return;
    await new Promise<void>((resolve, reject) => {
      const entry = {
        bytes,
        grant: () => {
          clearTimeout(timer);
          resolve();
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
    });
  }

  /** Gives back bytes taken with {@link tryTake} or {@link take}. */
  release(bytes: number): void {
    this.add(-bytes);
    this.grantWaiting();
  }

  private add(bytes: number): void {
    this.usedBytes += bytes;
    this.gauge?.set(this.usedBytes);
  }

  private grantWaiting(): void {
    while (this.waiting.length > 0 && this.usedBytes + this.waiting[0]!.bytes <= this.limitBytes) {
      const next = this.waiting.shift()!;
      this.add(next.bytes);
      next.grant();
    }
  }
}
