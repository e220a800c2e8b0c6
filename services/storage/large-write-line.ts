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
   * ahead of it when it joined; the line goes on without it.
   *
   * @param waitMs longest wait for the turn, in milliseconds (≤ 0: only an immediate turn).
   * @param write the write, started when its turn comes.
   * @param tooLate the error for a write whose turn did not come in time.
   * @throws whatever `write` throws, or `tooLate(ahead)`.
   */
  async run<T>(waitMs: number, write: () => Promise<T>, tooLate: (ahead: number) => Error): Promise<T> {
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
    const turn = ahead === 0 ? true : await Promise.race([before.then(() => true), new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), Math.max(0, waitMs))))]);
    clearTimeout(timer);
    if (!turn) {
      // The writes behind this one still wait for those before it.
      void before.then(finish);
      throw tooLate(ahead);
    }
    try {
      return await write();
    } finally {
      finish();
    }
  }
}
