import type { SqliteDatabase } from "../storage/sqlite-database.js";
import { SqliteChangeFeed } from "./sqlite-feed.js";
import type { Appended, EventLogStore, LogPage, NewRecord } from "./store.js";

/**
 * EventLogStore on SQLite (see sqlite-ops.ts for the schema): positions are
 * record counts, appends are group-committed by the worker with
 * `synchronous=FULL`, and reads go page by page (on the main thread's
 * read-only connection, or the reader worker for a record over 1 MiB).
 */
export class SqliteEventLogStore implements EventLogStore {
  readonly feed: SqliteChangeFeed;

  /** @param followPollIntervalMs milliseconds between the feed's safety checks (`--follow-poll-interval`; sqlite-feed.ts). */
  constructor(
    private readonly db: SqliteDatabase,
    followPollIntervalMs?: number,
  ) {
    this.feed = new SqliteChangeFeed(db, followPollIntervalMs);
  }

  append(sessionId: string, record: NewRecord): Promise<Appended> {
    return this.db.call("events.append", { sessionId, record });
  }

  readPage(sessionId: string, afterPosition: number, maxRecords: number): Promise<LogPage | undefined> {
    return this.db.call("events.read", { sessionId, afterPosition, maxRecords });
  }
}
