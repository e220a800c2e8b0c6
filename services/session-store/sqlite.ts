import type { SqliteDatabase } from "../storage/sqlite-database.js";
import type { SessionStore, StoredSessionInfo, StoredSnapshot } from "./store.js";

/**
 * SessionStore on SQLite: one row per session in the `sessions` table, every
 * write group-committed by the SQLite worker with `synchronous=FULL`.
 */
export class SqliteSessionStore implements SessionStore {
  constructor(private readonly db: SqliteDatabase) {}

  save(sessionId: string, snapshot: StoredSnapshot): Promise<void> {
    return this.db.call("session.save", { sessionId, snapshot });
  }

  create(sessionId: string, snapshot: StoredSnapshot): Promise<boolean> {
    return this.db.call("session.create", { sessionId, snapshot });
  }

  load(sessionId: string): Promise<StoredSnapshot | undefined> {
    return this.db.call("session.load", { sessionId });
  }

  list(): Promise<StoredSessionInfo[]> {
    return this.db.call("session.list", {});
  }

  delete(sessionId: string): Promise<void> {
    return this.db.call("session.delete", { sessionId });
  }
}
