/**
 * WAL checkpoints off the write path (issue 11, deliverable 3: large writes
 * isolated from small ones).
 *
 * SQLite's default is an automatic checkpoint inside the commit that takes
 * the WAL past 1,000 pages: that commit copies up to 4 MiB of pages into the
 * database file and fsyncs it before it returns. Under a loop of 64 MiB
 * Saves that commit was, as often as not, a small write's (a Renew waiting
 * for 4 MiB of copying and two fsyncs). Instead:
 *
 * - the writer's automatic checkpoint is only a backstop, at
 *   {@link FALLBACK_CHECKPOINT_PAGES} (when the checkpoints below cannot keep
 *   up, or a reader holds an old snapshot for long);
 * - the reader worker, whose connection may write (`query_only`, which
 *   allows checkpoints), runs `PRAGMA wal_checkpoint(PASSIVE)` when the
 *   main thread asks: at once after a group commit of large writes (staged
 *   chunks), and at most every {@link SMALL_WRITES_CHECKPOINT_MS} after small
 *   ones. A passive checkpoint never blocks the writer, and syncs the WAL
 *   before and the database file after copying (so the writer may restart
 *   the WAL only over pages that are on stable storage, whatever
 *   `synchronous` is).
 *
 * The writer restarts the WAL from its beginning at its next transaction
 * once a checkpoint has copied everything, as it did before.
 */

/**
 * Pages in the WAL at which the writer checkpoints by itself after a commit
 * (`PRAGMA wal_autocheckpoint`): 64 MiB at 4 KiB pages, one largest Save.
 */
export const FALLBACK_CHECKPOINT_PAGES = 16_384;

/** Milliseconds between background checkpoints while only small writes commit (one every second: two fsyncs, a few pages). */
export const SMALL_WRITES_CHECKPOINT_MS = 1000;

/**
 * Decides when the reader worker checkpoints: one checkpoint at a time, the
 * next one at once if large writes committed meanwhile, else after
 * {@link SMALL_WRITES_CHECKPOINT_MS} if any write did. `request` posts the
 * request to the worker; the owner calls {@link done} when the worker
 * answers (whether the checkpoint succeeded or not: a failed one is tried
 * again at the next commit).
 */
export class CheckpointScheduler {
  private running = false;
  private wanted: "none" | "soon" | "now" = "none";
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(private readonly request: () => void) {}

  /** A group commit was answered; `large` when it carried large writes (SqliteOp.large). */
  committed(large: boolean): void {
    if (large) this.wanted = "now";
    else if (this.wanted === "none") this.wanted = "soon";
    this.kick();
  }

  /** The worker answered the last request. */
  done(): void {
    this.running = false;
    this.kick();
  }

  /** No more requests (the database is closing). */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private kick(): void {
    if (this.running || this.stopped) return;
    if (this.wanted === "now") this.start();
    else if (this.wanted === "soon" && this.timer === undefined) {
      this.timer = setTimeout(() => {
        this.timer = undefined;
        if (!this.running && this.wanted !== "none") this.start();
      }, SMALL_WRITES_CHECKPOINT_MS);
      this.timer.unref();
    }
  }

  private start(): void {
    if (this.stopped) return;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.running = true;
    this.wanted = "none";
    this.request();
  }
}
