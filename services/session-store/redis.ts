import type { Redis } from "ioredis";
import { distinctBy, indexScan, type IndexScan } from "../storage/index-scan.js";
import { scoreIndexPages, type ScoredMember } from "../storage/redis-index-page.js";
import type { RedisKeys } from "../storage/redis-keys.js";
import { RedisOperations } from "../storage/redis-operation.js";
import { projectionOnce, type ProjectionSource } from "./projection-source.js";
import { DELETE_PROJECTED, RedisSessionMetadata, SAVE_PROJECTED } from "./redis-metadata.js";
import type { LineageAnswer, LineageQuery, MetadataPageAnswer, MetadataPageQuery, SessionStore, StoredSessionInfo, StoredSnapshot } from "./store.js";

function toBuffer(bytes: Uint8Array): Buffer {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

async function* sessionsOf(pages: AsyncIterable<ScoredMember[]>): AsyncGenerator<StoredSessionInfo, void, undefined> {
  for await (const page of pages) for (const e of page) yield { sessionId: e.member, modifiedAtMicros: Number(e.score) };
}

/**
 * SessionStore on Redis: a hash per session (hash-tagged by id) plus a sorted
 * set indexing ids by save time, so List never scans the keyspace, and the
 * partitioned metadata index and lineage records of redis-metadata.ts. Save,
 * Create and Delete are one script each, so the snapshot, its List entry,
 * its metadata row and its lineage records change together. Note the List
 * index is a separate slot from the session's keys: on a Redis Cluster these
 * scripts would need the index split per slot (issue 13).
 *
 * Every call is a bounded {@link RedisOperations} operation: writes carry an
 * operation record (exactly once across retries) and every call fails with
 * a StoreFailure (UNAVAILABLE) after `--store-timeout`. {@link open}, run
 * before the server listens, prepares the metadata (recording the partition
 * count, backfilling a store written by an earlier build); a call that finds
 * it not done (it failed) runs it again first.
 */
export class RedisSessionStore implements SessionStore {
  private readonly ops: RedisOperations;
  private readonly meta: RedisSessionMetadata;

  /** @param storeTimeoutMs `--store-timeout` in milliseconds. */
  constructor(
    redis: Redis,
    private readonly keys: RedisKeys,
    storeTimeoutMs: number,
  ) {
    this.ops = new RedisOperations(redis, storeTimeoutMs);
    this.meta = new RedisSessionMetadata(this.ops, keys);
  }

  /** Records the metadata configuration and backfills a store written by an earlier build (see RedisSessionMetadata.config). */
  async open(): Promise<void> {
    await this.meta.config();
  }

  /** A write: the projection is computed first, then the snapshot is written with it in one script. */
  private async put(sessionId: string, snapshot: StoredSnapshot, source: ProjectionSource, mode: "save" | "create"): Promise<boolean> {
    const projection = projectionOnce(source)();
    const { keys, args } = this.meta.write(await this.meta.config(), sessionId, projection);
    const op = this.ops.begin();
    const argv = [sessionId, snapshot.format, toBuffer(snapshot.payload), mode, ...args()];
    return (await op.script(SAVE_PROJECTED, keys, argv, op.record(this.keys.sessionOp(sessionId, op.id)))) === 1;
  }

  async save(sessionId: string, snapshot: StoredSnapshot, projection: ProjectionSource): Promise<void> {
    await this.put(sessionId, snapshot, projection, "save");
  }

  create(sessionId: string, snapshot: StoredSnapshot, projection: ProjectionSource): Promise<boolean> {
    return this.put(sessionId, snapshot, projection, "create");
  }

  async load(sessionId: string): Promise<StoredSnapshot | undefined> {
    const [format, payload] = await this.ops.read((r) => r.hmgetBuffer(this.keys.snapshot(sessionId), "format", "payload"));
    if (format === null || payload === null) return undefined;
    return { format: format.toString("utf8"), payload };
  }

  /** Pages through the session index in (save time, id) order; a session re-saved during the scan is kept at its first sighting. */
  scan(): IndexScan<StoredSessionInfo> {
    const index = this.keys.sessionIndex();
    const reader = this.ops;
    return indexScan(
      () => distinctBy(sessionsOf(scoreIndexPages(reader, index)), (s) => s.sessionId),
      () => reader.read((r) => r.zcard(index)),
    );
  }

  async delete(sessionId: string): Promise<void> {
    const { keys, args } = this.meta.delete(await this.meta.config(), sessionId);
    const op = this.ops.begin();
    const argv = [...args, ...this.keys.sessionDeleteChannels(sessionId)];
    await op.script(DELETE_PROJECTED, [...keys, ...this.keys.sessionData(sessionId)], argv, op.record(this.keys.sessionOp(sessionId, op.id)));
  }

  pageMetadata(query: MetadataPageQuery): Promise<MetadataPageAnswer> {
    return this.meta.page(query);
  }

  readLineage(query: LineageQuery): Promise<LineageAnswer> {
    return this.meta.lineage(query);
  }
}
