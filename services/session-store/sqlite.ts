import { indexScan, keysetScan, type IndexScan } from "../storage/index-scan.js";
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

  scan(): IndexScan<StoredSessionInfo> {
    return indexScan(
      () => keysetScan((after: string | undefined) => this.db.call("session.listPage", { after })),
      () => this.db.call("session.count", {}),
    );
  }

  delete(sessionId: string): Promise<void> {
    return this.db.call("session.delete", { sessionId });
  }
}
