import type { SqliteDatabase } from "../storage/sqlite-database.js";
import { EVENTS_TOPIC, type LogChange } from "./sqlite-ops.js";
import type { ChangeFeed, ChangeHint } from "./store.js";

/** Milliseconds between two checks for commits by other processes on the same file. */
export const POLL_INTERVAL_MS = 50;

/**
 * The SQLite change feed: one per process, never one per follower.
 *
 * - Same process: the worker reports every committed append and delete
 *   (`notify` topic `events`), so followers wake as soon as the commit is done.
 * - Other processes on the same file: while at least one session is watched,
 *   one timer asks the worker every {@link POLL_INTERVAL_MS} ms whether
 *   `PRAGMA data_version` moved (it moves only when another connection
 *   committed, so an idle store costs one pragma per tick) and, if it did,
 *   which logs have a stamp above the last one seen (an index range, not a
 *   scan). Only watched sessions are reported.
 */
export class SqliteChangeFeed implements ChangeFeed {
  private readonly watched = new Map<string, number>();
  private change: (sessionId: string, hint: ChangeHint) => void = () => undefined;
  private dataVersion = -1;
  private stamp = -1;
  private timer: NodeJS.Timeout | undefined;
  private starting: Promise<void> | undefined;
  private polling = false;

  constructor(private readonly db: SqliteDatabase) {
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
      await this.startPolling();
    } catch (err) {
      this.unwatch(sessionId);
      throw err;
    }
  }

  close(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    this.watched.clear();
  }

  unwatch(sessionId: string): void {
    const n = (this.watched.get(sessionId) ?? 0) - 1;
    if (n > 0) this.watched.set(sessionId, n);
    else this.watched.delete(sessionId);
    if (this.watched.size === 0 && this.timer !== undefined) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  /** Starts the poller from the current highest stamp; resolves once that starting point is read. */
  private startPolling(): Promise<void> {
    if (this.timer !== undefined) return Promise.resolve();
    this.starting ??= (async () => {
      try {
        const start = await this.db.call("events.poll", { dataVersion: -1, afterStamp: -1 });
        this.dataVersion = start.dataVersion;
        this.stamp = start.stamp;
        if (this.watched.size > 0 && this.timer === undefined) {
          this.timer = setInterval(() => void this.poll(), POLL_INTERVAL_MS);
          this.timer.unref();
        }
      } finally {
        this.starting = undefined;
      }
    })();
    return this.starting;
  }

  private async poll(): Promise<void> {
    if (this.polling) return;
    this.polling = true;
    try {
      for (;;) {
        const r = await this.db.call("events.poll", { dataVersion: this.dataVersion, afterStamp: this.stamp });
        this.dataVersion = r.dataVersion;
        this.stamp = r.stamp;
        for (const c of r.changes) if (this.watched.has(c.sessionId)) this.change(c.sessionId, { generation: c.generation, length: c.length });
        if (!r.more) break;
      }
    } catch {
      // The database failed or closed; health reports it, and the next tick tries again.
    } finally {
      this.polling = false;
    }
  }
}
