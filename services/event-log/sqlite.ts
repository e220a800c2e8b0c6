import type { SqliteDatabase } from "../storage/sqlite-database.js";
import { SqliteChangeFeed } from "./sqlite-feed.js";
import type { Appended, EventLogStore, LogPage, NewRecord } from "./store.js";

/**
 * EventLogStore on SQLite (see sqlite-ops.ts for the schema): positions are
 * record counts, appends are group-committed by the worker with
 * `synchronous=FULL`, and reads go page by page through the same worker.
 */
export class SqliteEventLogStore implements EventLogStore {
  readonly feed: SqliteChangeFeed;

  constructor(private readonly db: SqliteDatabase) {
    this.feed = new SqliteChangeFeed(db);
  }

  append(sessionId: string, record: NewRecord): Promise<Appended> {
    return this.db.call("events.append", { sessionId, record });
  }

  readPage(sessionId: string, afterPosition: number, maxRecords: number): Promise<LogPage | undefined> {
    return this.db.call("events.read", { sessionId, afterPosition, maxRecords });
  }
}
