/**
 * One SharedArrayBuffer kept between uses, released after it has been idle
 * for a while (issue 12, projection-thread.ts).
 *
 * Why: a fresh multi-MiB buffer costs its page faults on first touch, and on
 * this project's VMs those cost far more than the copy itself (a fresh
 * 16 MiB buffer filled: ~60 ms; the same copy into a buffer used before:
 * ~2 ms; bench/RESULTS.md "Projecting on a worker thread"). Saves of a large
 * session come one after another, so keeping the last buffer makes the
 * copy of every Save but the first cheap; releasing it after `idleMs` gives
 * the memory back when large Saves stop.
 */
export class SpareSharedBuffer {
  private spare: SharedArrayBuffer | undefined;
  private timer: NodeJS.Timeout | undefined;

  /**
   * @param idleMs milliseconds a returned buffer is kept unused before it is released.
   * @param roundBytes sizes are rounded up to a multiple of this (so payloads of similar sizes share a buffer).
   */
  constructor(
    private readonly idleMs: number,
    private readonly roundBytes: number,
  ) {}

  /**
   * A buffer of at least `bytes` bytes, for the caller alone until it
   * {@link give}s it back: the spare if it is large enough (`fresh` false),
   * else a new one (`fresh` true: allocated, not touched yet, so its pages
   * fault on first touch).
   */
  take(bytes: number): { buffer: SharedArrayBuffer; fresh: boolean } {
    const spare = this.spare;
    if (spare !== undefined && spare.byteLength >= bytes) {
      this.spare = undefined;
      return { buffer: spare, fresh: false };
    }
    return { buffer: new SharedArrayBuffer(Math.ceil(bytes / this.roundBytes) * this.roundBytes), fresh: true };
  }

  /** Hands a buffer from {@link take} back: it becomes the spare unless the spare is larger; the spare is released after `idleMs` unused. */
  give(buffer: SharedArrayBuffer): void {
    if (this.spare === undefined || buffer.byteLength > this.spare.byteLength) this.spare = buffer;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.spare = undefined;
      this.timer = undefined;
    }, this.idleMs);
    this.timer.unref();
  }

  /** Bytes held by the spare (0 when none): for tests and metrics. */
  get heldBytes(): number {
    return this.spare?.byteLength ?? 0;
  }
}
