import { indexScan, keysetScan, type IndexScan } from "../storage/index-scan.js";
import type { SqliteDatabase } from "../storage/sqlite-database.js";
import { processIdentity } from "../storage/process-identity.js";
import { isStoreFailure, StoreFailure } from "../storage/store-failure.js";
import { LargeWriteLine } from "../storage/large-write-line.js";
import { ProjectionRun, type ProjectionSource } from "./projection-source.js";
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
 * is projected while it is staged, not before (issue 12; see
 * {@link ProjectionSource}).
 */
export class SqliteSessionStore implements SessionStore {
  /** The large Saves of this process, staged one at a time. */
  private readonly line = new LargeWriteLine();

  constructor(private readonly db: SqliteDatabase) {}

  /** Nothing to do: the schema migration (metadata backfill included) ran when the database was opened. */
  async open(): Promise<void> {}

  async save(sessionId: string, snapshot: StoredSnapshot, projection: ProjectionSource, signal?: AbortSignal): Promise<void> {
    await this.put("session.save", sessionId, snapshot, projection, signal);
  }

  async create(sessionId: string, snapshot: StoredSnapshot, projection: ProjectionSource, signal?: AbortSignal): Promise<boolean> {
    return (await this.put("session.create", sessionId, snapshot, projection, signal)).written;
  }

  /**
   * A write. A small payload is projected, then written in one call. A
   * staged one is projected while it is staged: the projection starts once
   * the worker has the first chunk (on the projection worker for a payload
   * the service hands there, so it overlaps the whole staging; issue 12),
   * and the staged blob is published once both are done. A projection that
   * fails stops the staging at the next chunk, abandons it (nothing is
   * visible) and is the answer, even when the store failed too: bad input is
   * refused as such. A staged write whose `signal` aborts (its caller has
   * gone) is given up likewise, before its next chunk or its publication.
   */
  private async put(op: "session.save" | "session.create", sessionId: string, snapshot: StoredSnapshot, source: ProjectionSource, signal: AbortSignal | undefined): Promise<PutResult> {
    const run = new ProjectionRun(source);
    const size = snapshot.payload.byteLength;
    if (size <= STAGE_BYTES) return this.dropAfter(await this.db.call(op, { sessionId, snapshot, projection: await run.start() }));
    if (op === "session.create" && (await this.db.call("session.exists", { sessionId }))) {
      // Answered before anything is staged (and checked again when published): a large Create of an existing id neither holds
      // the staging line nor runs out of --store-timeout staging a payload that cannot be stored (wire-contract.md 2.5: ALREADY_EXISTS).
      // The projection still runs, so a payload it refuses is refused as such, as for a small Create.
      await run.start();
      return { written: false, garbage: undefined };
    }
    let blobId: number;
    try {
      blobId = await this.stage(snapshot.payload, run, signal);
    } catch (err) {
      // Bad input is refused as such, unless nobody is left to be told.
      if (signal?.aborted !== true) await run.start();
      throw err;
    }
    try {
      const projection = await run.start();
      signal?.throwIfAborted();
      return this.dropAfter(await this.db.call(op, { sessionId, snapshot: { format: snapshot.format, payload: new Uint8Array(0) }, projection, staged: { blobId, size } }));
    } catch (err) {
      this.abandon(blobId);
      throw err;
    }
  }

  /**
   * Stages `payload` as a new blob, one chunk per write; answers its id.
   * `run` is started once the worker has the first chunk, and checked
   * before every later chunk: its failure gives the staging up and is
   * thrown. Large Saves of this process stage one at a time, in arrival
   * order ({@link LargeWriteLine}): when several staged at once, a burst that
   * could not all be staged in time failed whole. The staging as a whole,
   * its wait in that line included, has one `--store-timeout`, as a Redis
   * operation has (storage/redis-operation.ts), not one per chunk: a
   * staging still unfinished when it has passed (another process holding
   * the write lock again and again, say) is given up before its next chunk,
   * so a Save is never published long after its caller was told it failed.
   *
   * A staging whose `signal` aborts (its caller has gone) leaves the line,
   * or stops before its next chunk: abandoned Saves neither keep the Saves
   * behind them waiting nor get published after their caller was answered.
   *
   * @throws StoreFailure `unreachable` (UNAVAILABLE, nothing written) when the
   *   staging outlasts `--store-timeout` or its turn does not come within
   *   it; any failure of a chunk's write; `signal.reason` once it aborted.
   */
  private stage(payload: Uint8Array, run: ProjectionRun, signal: AbortSignal | undefined): Promise<number> {
    const deadline = performance.now() + this.db.storeTimeoutMs;
    const late = (staged: string) =>
      new StoreFailure("unreachable", `the SQLite database did not stage this Save's ${payload.byteLength} bytes within ${this.db.storeTimeoutMs} ms (--store-timeout; ${staged}); nothing was written`);
    return this.line.run(
      deadline - performance.now(),
      () => this.stageChunks(payload, run, deadline, late, signal),
      (ahead) => late(`it waited behind ${ahead} large Saves of this server staging one at a time`),
      signal,
    );
  }

  /** {@link stage}'s writes, once its turn has come: the blob, then its chunks, until `deadline` (performance.now() milliseconds) or until `signal` aborts. */
  private async stageChunks(payload: Uint8Array, run: ProjectionRun, deadline: number, late: (staged: string) => StoreFailure, signal: AbortSignal | undefined): Promise<number> {
    // Shared memory (a large gRPC request, grpc-message-joiner.ts) reaches the worker as is; other memory is copied into a buffer of its own that moves there.
    const shared = payload.buffer instanceof SharedArrayBuffer;
    let blobId: number | undefined;
    let at = 0;
    try {
      blobId = await this.db.call("session.stage", { owner: OWNER });
      for (let seq = 0; at < payload.byteLength; seq++, at += CHUNK_BYTES) {
        if (seq > 0) run.throwIfFailed();
        signal?.throwIfAborted();
        if (performance.now() > deadline) throw late(`${at} staged`);
        const chunk = payload.subarray(at, at + CHUNK_BYTES);
        const bytes = shared ? chunk : new Uint8Array(chunk);
        const written = this.db.call("session.stageChunk", { blobId, seq, bytes }, shared ? [] : [bytes.buffer as ArrayBuffer]);
        if (seq === 0) {
          this.db.postNow();
          void run.start();
        }
        await written;
      }
    } catch (err) {
      if (blobId !== undefined) this.abandon(blobId);
      // A staging write is never visible: one whose answer did not come in time (another process holding the write lock, say)
      // left no snapshot a Load could see, so the Save says "nothing was written", not "it may still be committed".
      throw isStoreFailure(err, "outcome_unknown") ? late(`${at} staged`) : err;
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
