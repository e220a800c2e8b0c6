/**
 * Large writes of one store, one at a time, in the order they arrived
 * (issue 11). A large Save is staged chunk by chunk; when several stage at
 * once, their chunks take turns and all of them advance together, so a
 * burst that cannot be staged within `--store-timeout` fails whole: a
 * fresh-eyes run saw 7 of 8 concurrent 50–57 MiB Saves give up at about 99 %
 * staged, with all that work thrown away. In a line, the first finish in
 * their time and only the last ones, which never started, fail.
 */
export class LargeWriteLine {
  /** Settles when the last write in the line (running or waiting) is done. */
  private tail: Promise<void> = Promise.resolve();
  /** Writes running or waiting. */
  private queued = 0;

  /** Writes running or waiting now. */
  get length(): number {
    return this.queued;
  }

  /**
   * Runs `write` once every write that joined the line before it is done,
   * and answers what it answers (or throws what it throws). A write whose
   * turn has not come within `waitMs` milliseconds does not run: `tooLate`
   * makes the error thrown instead, given the number of writes that were
   * ahead of it when it joined; the line goes on without it. A turn that
   * comes only as `waitMs` runs out counts as not in time: the write would
   * have no time left, and would fail saying its store did not answer
   * (a fresh-eyes run saw `(no attempt made)` on Redis, `0 staged` on
   * SQLite, for Saves that had only waited). A write whose `signal` aborts
   * before its turn (its caller has gone) leaves the line too, throwing the
   * signal's reason.
   *
   * @param waitMs longest wait for the turn, in milliseconds (≤ 0: only an immediate turn).
   * @param write the write, started when its turn comes.
   * @param tooLate the error for a write whose turn did not come in time.
   * @param signal aborts the wait for the turn (the write itself watches it too, if it should stop).
   * @throws whatever `write` throws, `tooLate(ahead)`, or `signal.reason`.
   */
  async run<T>(waitMs: number, write: () => Promise<T>, tooLate: (ahead: number) => Error, signal?: AbortSignal): Promise<T> {
    signal?.throwIfAborted();
    const joined = performance.now();
    const ahead = this.queued;
    const before = this.tail;
    let done!: () => void;
    this.tail = new Promise<void>((resolve) => (done = resolve));
    this.queued++;
    const finish = () => {
      this.queued--;
      done();
    };
    let timer: NodeJS.Timeout | undefined;
    let gone: (() => void) | undefined;
    const turn: boolean | "gone" =
      ahead === 0
        ? true
        : await Promise.race([
            before.then(() => true),
            new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), Math.max(0, waitMs)))),
            new Promise<"gone">((resolve) => signal?.addEventListener("abort", (gone = () => resolve("gone")), { once: true })),
          ]);
    clearTimeout(timer);
    if (gone !== undefined) signal!.removeEventListener("abort", gone);
    if (turn === true && ahead > 0 && performance.now() - joined >= waitMs) {
      finish();
      throw tooLate(ahead);
    }
    if (turn !== true) {
      // The writes behind this one still wait for those before it.
      void before.then(finish);
      throw turn === "gone" ? signal!.reason : tooLate(ahead);
    }
    try {
      return await write();
    } finally {
      finish();
    }
  }
}
