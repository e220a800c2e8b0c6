import { indexScan, keysetScan, type IndexScan } from "../storage/index-scan.js";
import type { SqliteDatabase } from "../storage/sqlite-database.js";
import type { SessionProjection } from "./projection.js";
import type { LineageAnswer, LineageQuery, MetadataPageAnswer, MetadataPageQuery, SessionStore, StoredSessionInfo, StoredSnapshot } from "./store.js";

/**
 * SessionStore on SQLite: one row per session in the `sessions` table, its
 * metadata row, lineage records and paging scopes beside it (see
 * sqlite-metadata.ts), every write group-committed by the SQLite worker with
 * `synchronous=FULL`, each in one savepoint so the snapshot and its
 * projection change together.
 */
export class SqliteSessionStore implements SessionStore {
  constructor(private readonly db: SqliteDatabase) {}

  /** Nothing to do: the schema migration (metadata backfill included) ran when the database was opened. */
  async open(): Promise<void> {}

  save(sessionId: string, snapshot: StoredSnapshot, projection: SessionProjection): Promise<void> {
    return this.db.call("session.save", { sessionId, snapshot, projection });
  }

  create(sessionId: string, snapshot: StoredSnapshot, projection: SessionProjection): Promise<boolean> {
    return this.db.call("session.create", { sessionId, snapshot, projection });
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

  pageMetadata(query: MetadataPageQuery): Promise<MetadataPageAnswer> {
    return this.db.call("session.page", query);
  }

  readLineage(query: LineageQuery): Promise<LineageAnswer> {
    return this.db.call("session.lineage", query);
  }
}
