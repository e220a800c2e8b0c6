import { watch, type FSWatcher } from "node:fs";
import { basename, dirname } from "node:path";
import type { SqliteDatabase } from "../storage/sqlite-database.js";
import { EVENTS_TOPIC, type LogChange } from "./sqlite-ops.js";
import type { ChangeFeed, ChangeHint } from "./store.js";

/** Default milliseconds between two safety checks for other processes' commits (`--follow-poll-interval`). */
export const DEFAULT_FOLLOW_POLL_MS = 1000;

/**
 * Milliseconds between the checks that follow a change of the WAL file: at
 * once, then again while the commit that wrote it may still be waiting for
 * its fsync (it becomes visible only after, and nothing on disk changes when
 * it does: the commit mark is in the memory-mapped `-shm` file): every
 * millisecond for the first 30 ms (a local fsync typically takes 1–15 ms, and
 * the follower should not wait for the next check much longer than for the
 * fsync; issue 11 asks append → follower p99 ≤ 20 ms), every 5 ms up to
 * 100 ms, every 10 ms up to half a second, then every 50 ms up to 10 s after
 * the last change: an fsync on a busy disk can take hundreds of
 * milliseconds, and on a loaded CI machine one outlasted the first half
 * second, so that its append reached a follower only at the safety check
 * (an hour later in the test that caught it). A check is one pragma on the
 * main thread's read-only connection, about 10–25 µs: a writer that commits
 * without pause costs the followers' process about 1,000 checks a second,
 * and the tail after its last commit about 200 more.
 */
const SETTLE_DELAYS_MS = [0, ...repeat(1, 30), ...repeat(5, 14), ...repeat(10, 40), ...repeat(50, 190)];

function repeat(ms: number, times: number): number[] {
  return Array.from({ length: times }, () => ms);
}

/**
 * The SQLite change feed: one per process, never one per follower.
 *
 * - Same process: the writer reports every committed append and delete
 *   (`notify` topic `events`), so followers wake as soon as the commit is done.
 * - Other processes on the same file (issue 11): while at least one session
 *   is watched, the feed watches the file's directory for changes of the WAL
 *   file (`fs.watch`; every commit writes the WAL). A change starts a short
 *   series of checks ({@link SETTLE_DELAYS_MS}), since a commit is visible
 *   only once its fsync is done, after the write that was noticed. A check
 *   asks the main thread's read-only connection whether `PRAGMA
 *   data_version` moved (an idle store costs one pragma) and, if it did,
 *   which logs have a stamp above the last one seen (an index range, not a
 *   scan); only watched sessions are reported. A safety check every
 *   `pollIntervalMs` (`--follow-poll-interval`) covers notifications the
 *   file system does not give (a network file system, no inotify watches
 *   left), or a commit whose fsync outlasts the checks.
 *
 * A commit of this process moves `data_version` too, so a check may report
 * a change the writer reported already: followers ignore a hint that shows
 * nothing new.
 */
export class SqliteChangeFeed implements ChangeFeed {
  private readonly watched = new Map<string, number>();
  private change: (sessionId: string, hint: ChangeHint) => void = () => undefined;
  private dataVersion = -1;
  private stamp = -1;
  private safetyTimer: NodeJS.Timeout | undefined;
  private watcher: FSWatcher | undefined;
  private settleTimer: NodeJS.Timeout | undefined;
  private settleStep = SETTLE_DELAYS_MS.length;
  private starting: Promise<void> | undefined;
  private polling = false;
  /** A check was asked for while one was running: that one reads again when it is done. */
  private pollAgain = false;

  /** @param pollIntervalMs milliseconds between safety checks (`--follow-poll-interval`). */
  constructor(
    private readonly db: SqliteDatabase,
    private readonly pollIntervalMs = DEFAULT_FOLLOW_POLL_MS,
  ) {
    db.on("notify", (topic: string, data: LogChange) => {
      if (topic === EVENTS_TOPIC && this.watched.has(data.sessionId)) this.change(data.sessionId, { generation: data.generation, length: data.length });
    });
  }

  listen(change: (sessionId: string, hint: ChangeHint) => void): void {
    this.change = change;
  }

  async watch(sessionId: string): Promise<void> {
    this.watched.set(sessionId, (this.watched.get(sessionId) ?? 0) + 1);
    try {
      await this.start();
    } catch (err) {
      this.unwatch(sessionId);
      throw err;
    }
  }

  unwatch(sessionId: string): void {
    const n = (this.watched.get(sessionId) ?? 0) - 1;
    if (n > 0) this.watched.set(sessionId, n);
    else this.watched.delete(sessionId);
    if (this.watched.size === 0) this.stop();
  }

  close(): void {
    this.watched.clear();
    this.stop();
  }

  private get running(): boolean {
    return this.safetyTimer !== undefined;
  }

  /**
   * Watches the WAL, reads the current highest stamp (the starting point),
   * arms the safety check and starts one series of checks. In that order, so
   * that no commit of another process is missed at the start: one whose WAL
   * write came before the watch but which became visible only after the
   * starting point was read (its fsync still running) is caught by the
   * first series, one that wrote the WAL later starts a series of its own.
   * (Watching after the read lost such a commit until the safety check; a
   * test with that check an hour apart timed out on a loaded machine.)
   */
  private start(): Promise<void> {
    if (this.running) return Promise.resolve();
    this.starting ??= (async () => {
      const watcher = this.watchWal();
      try {
        const start = await this.db.call("events.poll", { dataVersion: -1, afterStamp: -1 });
        if (this.watched.size > 0 && !this.running) {
          this.dataVersion = start.dataVersion;
          this.stamp = start.stamp;
          this.safetyTimer = setInterval(() => void this.poll(), this.pollIntervalMs);
          this.safetyTimer.unref();
          this.watcher = watcher;
          this.settle();
        } else watcher?.close();
      } catch (err) {
        watcher?.close();
        throw err;
      } finally {
        this.starting = undefined;
      }
    })();
    return this.starting;
  }

  private stop(): void {
    clearInterval(this.safetyTimer);
    clearTimeout(this.settleTimer);
    this.watcher?.close();
    this.safetyTimer = undefined;
    this.settleTimer = undefined;
    this.watcher = undefined;
  }

  /**
   * Watches the database's directory (the WAL file comes and goes with the
   * connections) and starts a series of checks when the WAL changes; none
   * for an in-memory database, or when the file system cannot watch.
   */
  private watchWal(): FSWatcher | undefined {
    if (this.db.path === ":memory:") return undefined;
    const wal = `${basename(this.db.path)}-wal`;
    try {
      const watcher = watch(dirname(this.db.path), { persistent: false }, (_event, file) => {
        if (file === null || file === wal) this.settle();
      });
      // A watch that fails later (the directory removed): the safety check remains.
      watcher.on("error", () => watcher.close());
      return watcher;
    } catch {
      return undefined;
    }
  }

  /**
   * (Re)starts the series of checks after a change of the WAL. A check
   * already waiting for one of the series' later, longer delays is moved to
   * now: the new commit must not wait for it. While the pending check is at
   * most a millisecond away (a commit writes the WAL several times in a
   * row), the series only starts over from there.
   */
  private settle(): void {
    if (this.settleTimer !== undefined && SETTLE_DELAYS_MS[this.settleStep - 1]! <= 1) {
      this.settleStep = 1;
      return;
    }
    clearTimeout(this.settleTimer);
    this.settleStep = 0;
    this.nextSettle();
  }

  private nextSettle(): void {
    this.settleTimer = undefined;
    if (this.settleStep >= SETTLE_DELAYS_MS.length || !this.running) return;
    this.settleTimer = setTimeout(() => {
      void this.poll();
      this.nextSettle();
    }, SETTLE_DELAYS_MS[this.settleStep++]);
  }

  /**
   * One check: reports the watched logs changed since the last one. A check
   * asked for while one is running (its read went to the reader worker, say)
   * is not dropped: the running one reads once more when it is done, since
   * the commit it was asked for may have become visible after that read.
   */
  private async poll(): Promise<void> {
    if (this.polling) {
      this.pollAgain = true;
      return;
    }
    this.polling = true;
    try {
      for (;;) {
        this.pollAgain = false;
        const r = await this.db.call("events.poll", { dataVersion: this.dataVersion, afterStamp: this.stamp });
        this.dataVersion = r.dataVersion;
        this.stamp = r.stamp;
        for (const c of r.changes) if (this.watched.has(c.sessionId)) this.change(c.sessionId, { generation: c.generation, length: c.length });
        if (!r.more && !this.pollAgain) break;
      }
    } catch {
      // The database failed or closed; health reports it, and the next check tries again.
    } finally {
      this.polling = false;
    }
  }
}
