import { publishCommand, type RedisClient } from "../storage/redis-client.js";
import { distinctBy, indexScan, type IndexScan } from "../storage/index-scan.js";
import { mergedScoreIndex, type ScoredMember } from "../storage/redis-index-page.js";
import type { RedisKeys } from "../storage/redis-keys.js";
import { RedisOperations } from "../storage/redis-operation.js";
import { ProjectionRun, type ProjectionSource } from "./projection-source.js";
import { DELETE_PROJECTED, RedisSessionMetadata } from "./redis-metadata.js";
import { INLINE_PAYLOAD_BYTES, readSnapshot, saveSnapshot } from "./redis-payload.js";
import { LargeWriteLine } from "../storage/large-write-line.js";
import { StoreFailure } from "../storage/store-failure.js";
import type { LineageAnswer, LineageQuery, MetadataPageAnswer, MetadataPageQuery, SessionStore, StoredSessionInfo, StoredSnapshot } from "./store.js";

function toBuffer(bytes: Uint8Array): Buffer {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

async function* sessionsOf(entries: AsyncIterable<ScoredMember>): AsyncGenerator<StoredSessionInfo, void, undefined> {
  for await (const e of entries) yield { sessionId: e.member, modifiedAtMicros: Number(e.score) };
}

/**
 * SessionStore on Redis: a hash per session (a payload over 1 MiB in a list
 * of chunks beside it, see redis-payload.ts) plus a sorted set per partition
 * indexing the partition's ids by save time, so List never scans the
 * keyspace, and the partitioned metadata index and lineage records of
 * redis-metadata.ts. A session's keys carry its partition's hash tag
 * (storage/redis-layout.ts), so Save, Create and Delete are one script each
 * on one slot: the snapshot, its List entry, its metadata row and its
 * lineage records change together, on a Redis Cluster too (issue 13).
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
  /** The large Saves of this process, staged one at a time. */
  private readonly line = new LargeWriteLine();
  private readonly meta: RedisSessionMetadata;

  /** @param storeTimeoutMs `--store-timeout` in milliseconds. */
  constructor(
    redis: RedisClient,
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

  /**
   * Save or Create in one operation: the projection is started first (on
   * the projection worker for a payload the service hands there; issue 12);
   * a payload over 1 MiB is staged in chunks meanwhile (redis-payload.ts),
   * the staging stopping at the next chunk if the projection fails, one
   * such Save of this process at a time, in arrival order, its wait counted
   * in its `--store-timeout` ({@link LargeWriteLine}: when several staged at
   * once, a burst that could not all be staged in time failed whole); then,
   * once the projection is done, one recorded script writes the snapshot
   * (publishing the chunks), its List entry, metadata row and lineage
   * records together. A projection that fails is the answer, even when the
   * store failed too: bad input is refused as such. A staged Save whose
   * `signal` aborts (its caller has gone) leaves the line, or stops before
   * its next chunk or its publication, nothing written.
   */
  private async put(sessionId: string, snapshot: StoredSnapshot, source: ProjectionSource, mode: "save" | "create", signal: AbortSignal | undefined): Promise<boolean> {
    const run = new ProjectionRun(source);
    const projected = run.start();
    try {
      run.throwIfFailed();
      const config = await this.meta.config();
      const op = this.ops.begin();
      const write = projected.then((projection) => this.meta.write(config, sessionId, projection, op.id));
      // Awaited by saveSnapshot, which may start only after a wait (the existence check of a large Create, the staging
      // line): a projection refused meanwhile must not be an unhandled rejection, which ends the process.
      write.catch(() => undefined);
      const payload = toBuffer(snapshot.payload);
      const goOn = () => {
        run.throwIfFailed();
        signal?.throwIfAborted();
      };
      const saved = () => saveSnapshot(op, this.ops, this.keys, write, { sessionId, format: snapshot.format, payload, mode }, goOn);
      if (payload.byteLength <= INLINE_PAYLOAD_BYTES) return (await saved()) === 1;
      if (mode === "create" && (await this.ops.read((r) => r.hexists(this.keys.snapshot(sessionId), "modified_us"))) === 1) {
        // As on SQLite: a large Create of an existing id is answered before anything is staged (the script checks again when it publishes).
        await projected;
        return false;
      }
      const late = (ahead: number) =>
        new StoreFailure("unreachable", `Redis did not take this Save's ${payload.byteLength} bytes within ${this.ops.timeoutMs} ms (--store-timeout): it waited behind ${ahead} large Saves of this server staging one at a time; nothing was written`);
      return (await this.line.run(op.remainingMs(), saved, late, signal)) === 1;
    } catch (err) {
      await projected;
      throw err;
    }
  }

  async save(sessionId: string, snapshot: StoredSnapshot, projection: ProjectionSource, signal?: AbortSignal): Promise<void> {
    await this.put(sessionId, snapshot, projection, "save", signal);
  }

  create(sessionId: string, snapshot: StoredSnapshot, projection: ProjectionSource, signal?: AbortSignal): Promise<boolean> {
    return this.put(sessionId, snapshot, projection, "create", signal);
  }

  async load(sessionId: string): Promise<StoredSnapshot | undefined> {
    const read = await readSnapshot(this.ops, this.keys, sessionId);
    return read === undefined ? undefined : { format: read.format, payload: read.payload, headroom: read.headroom };
  }

  /**
   * Pages through the session index in (save time, id) order, merging its
   * partitions (k-way); a session re-saved during the scan is kept at its
   * first sighting.
   */
  scan(): IndexScan<StoredSessionInfo> {
    const parts = this.keys.layout.all().map((p) => this.keys.sessionIndex(p));
    const reader = this.ops;
    return indexScan(
      () => distinctBy(sessionsOf(mergedScoreIndex(reader, parts)), (s) => s.sessionId),
      async () => (await Promise.all(parts.map((k) => reader.read((r) => r.zcard(k))))).reduce((a, b) => a + b, 0),
    );
  }

  async delete(sessionId: string): Promise<void> {
    const { keys, args } = this.meta.delete(await this.meta.config(), sessionId);
    const op = this.ops.begin();
    const argv = [...args, publishCommand(this.ops.redis), ...this.keys.sessionDeleteChannels(sessionId)];
    await op.script(DELETE_PROJECTED, [...keys, ...this.keys.sessionData(sessionId)], argv, op.record(this.keys.sessionOp(sessionId, op.id)));
  }

  pageMetadata(query: MetadataPageQuery): Promise<MetadataPageAnswer> {
    return this.meta.page(query);
  }

  readLineage(query: LineageQuery): Promise<LineageAnswer> {
    return this.meta.lineage(query);
  }
}
