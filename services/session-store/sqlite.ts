import { indexScan, keysetScan, type IndexScan } from "../storage/index-scan.js";
import type { SqliteDatabase } from "../storage/sqlite-database.js";
import { processIdentity } from "../storage/process-identity.js";
import { projectionOnce, type ProjectionSource } from "./projection-source.js";
import { CHUNK_BYTES, STAGE_BYTES } from "./sqlite-blobs.js";
import type { PutResult } from "./sqlite-ops.js";
import type { LineageAnswer, LineageQuery, MetadataPageAnswer, MetadataPageQuery, SessionStore, StoredSessionInfo, StoredSnapshot } from "./store.js";

/** This process, as the owner of the payloads it stages (sqlite-blobs.ts). */
const OWNER = processIdentity();

/**
 * SessionStore on SQLite: one row per session in the `sessions` table, its
 * metadata row, lineage records and paging scopes beside it (see
 * sqlite-metadata.ts), every write group-committed by the SQLite worker with
 * `synchronous=FULL`, each in one savepoint so the snapshot and its
 * projection change together.
 *
 * A payload above 1 MiB is staged first (issue 11, sqlite-blobs.ts): chunk
 * by chunk, each chunk its own small transaction (moved to the worker, not
 * copied), so that small writes are committed between them; then the Save
 * publishes the staged blob in one small transaction, and is durable and
 * atomic like any other. The blob a write replaced is dropped afterwards, a
 * few chunks per transaction, without holding up the answer. Such a Save
 * is projected while the worker writes its first chunk, not before the
 * staging starts (issue 12; see {@link ProjectionSource}).
 */
export class SqliteSessionStore implements SessionStore {
  constructor(private readonly db: SqliteDatabase) {}

  /** Nothing to do: the schema migration (metadata backfill included) ran when the database was opened. */
  async open(): Promise<void> {}

  async save(sessionId: string, snapshot: StoredSnapshot, projection: ProjectionSource): Promise<void> {
    await this.put("session.save", sessionId, snapshot, projection);
  }

  async create(sessionId: string, snapshot: StoredSnapshot, projection: ProjectionSource): Promise<boolean> {
    return (await this.put("session.create", sessionId, snapshot, projection)).written;
  }

  /**
   * A write. A small payload is projected, then written in one call. A
   * staged one is projected while the worker writes its first chunk (so
   * the projection costs the Save little; issue 12); a projection that
   * throws abandons the staging (nothing is visible) and its error is the
   * answer, even when the store failed too: bad input is refused as such.
   */
  private async put(op: "session.save" | "session.create", sessionId: string, snapshot: StoredSnapshot, source: ProjectionSource): Promise<PutResult> {
    const project = projectionOnce(source);
    const size = snapshot.payload.byteLength;
    if (size <= STAGE_BYTES) return this.dropAfter(await this.db.call(op, { sessionId, snapshot, projection: project() }));
    let blobId: number;
    try {
      blobId = await this.stage(snapshot.payload, project);
    } catch (err) {
      project();
      throw err;
    }
    try {
      return this.dropAfter(await this.db.call(op, { sessionId, snapshot: { format: snapshot.format, payload: new Uint8Array(0) }, projection: project(), staged: { blobId, size } }));
    } catch (err) {
      this.abandon(blobId);
      throw err;
    }
  }

  /**
   * Stages `payload` as a new blob, one chunk per write; answers its id.
   * `whileWriting` runs on this thread once, while the worker writes the
   * first chunk; what it throws gives the staging up and is rethrown.
   */
  private async stage(payload: Uint8Array, whileWriting: () => unknown): Promise<number> {
    const blobId = await this.db.call("session.stage", { owner: OWNER });
    try {
      for (let seq = 0, at = 0; at < payload.byteLength; seq++, at += CHUNK_BYTES) {
        // A copy of its own, so that its memory can move to the worker (the payload is a view into the request).
        const bytes = new Uint8Array(Math.min(CHUNK_BYTES, payload.byteLength - at));
        bytes.set(payload.subarray(at, at + bytes.byteLength));
        const written = this.db.call("session.stageChunk", { blobId, seq, bytes }, [bytes.buffer]);
        if (seq === 0) {
          this.db.postNow();
          try {
            whileWriting();
          } catch (err) {
            await written.catch(() => undefined);
            throw err;
          }
        }
        await written;
      }
    } catch (err) {
      this.abandon(blobId);
      throw err;
    }
    return blobId;
  }

  /** Gives up a staging and drops what it wrote, in the background (whatever fails here is removed at the next start). */
  private abandon(blobId: number): void {
    this.db.call("session.unstage", { blobId }).then(
      () => this.drop(blobId),
      () => undefined,
    );
  }

  /** Starts dropping the blob a write made garbage, if any; answers `result`. */
  private dropAfter(result: PutResult): PutResult {
    if (result.garbage !== undefined) this.drop(result.garbage);
    return result;
  }

  /** Deletes a garbage blob a few chunks per transaction, in the background. */
  private drop(blobId: number): void {
    const step = (): void => {
      this.db.call("session.dropChunks", { blobId }).then(
        (deleted) => (deleted > 0 ? step() : undefined),
        () => undefined,
      );
    };
    step();
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

  async delete(sessionId: string): Promise<void> {
    const garbage = await this.db.call("session.delete", { sessionId });
    if (garbage !== undefined) this.drop(garbage);
  }

  pageMetadata(query: MetadataPageQuery): Promise<MetadataPageAnswer> {
    return this.db.call("session.page", query);
  }

  readLineage(query: LineageQuery): Promise<LineageAnswer> {
    return this.db.call("session.lineage", query);
  }
}
