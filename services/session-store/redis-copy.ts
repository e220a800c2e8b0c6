import type { RedisKeys } from "../storage/redis-keys.js";
import type { RedisOperations } from "../storage/redis-operation.js";
import { redisScript } from "../storage/redis-script.js";
import { readEach, type KindStore } from "../storage/copy/kind-store.js";
import { copiedProjection, lineageCopyId, parseLineageCopyId, projectedRow, type SessionCopy } from "./copy-format.js";
import { decodeLineage, encodeLineage, RedisSessionMetadata, relatedPrefixes, type MetaConfig } from "./redis-metadata.js";
import { readSnapshot, saveSnapshot } from "./redis-payload.js";
import type { ActivityState } from "./activity.js";
import type { LineageRecord } from "./store.js";

/**
 * Stores one lineage record exactly as given (state and deletion time
 * included), with its index entries, for `mecatl-drivers copy`.
 * KEYS[1] `lineage:records`, KEYS[2] `lineage:state`, KEYS[3]
 * `lineage:ids`, KEYS[4] `lineage:related` (all of the record's partition).
 * ARGV[1] record key, ARGV[2] record JSON, ARGV[3] state (`retained` or
 * `pruned:<microseconds>`), ARGV[4..] related prefixes (`<related key>|`).
 * Returns 1 (recorded).
 */
const PUT_LINEAGE = redisScript({
  name: "mecatlSessionLineagePut",
  lua: `
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('ZADD', KEYS[3], 0, ARGV[1])
for i = 4, #ARGV do redis.call('ZADD', KEYS[4], 0, ARGV[i] .. ARGV[1]) end
return op_done(1)
`,
});

function toBuffer(bytes: Uint8Array): Buffer {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** A metadata row as kept in a partition's `rows` hash (redis-metadata.ts). */
interface StoredRow {
  a: ActivityState;
  b: number;
  m: string | null;
}

/**
 * Sessions and lineage records of a Redis store, as `mecatl-drivers copy`
 * reads and writes them (issue 14; services/storage/copy/kind-store.ts).
 * Reading writes nothing, not even the metadata configuration: a session
 * whose snapshot has no metadata row yet (a store an older build wrote) is
 * projected from its payload as the start-up backfill would. Writing goes
 * through the Save script in its `import` mode (the source's save time
 * instead of Redis's clock; a payload over 1 MiB staged first, as a Save does), so the snapshot, List index, metadata row,
 * paging scopes and the current incarnation's lineage record change
 * together, and through {@link PUT_LINEAGE} for lineage records.
 */
export class RedisSessionCopy {
  private readonly meta: RedisSessionMetadata;
  private recorded: MetaConfig | undefined;

  /** @param ops the store's bounded, retried Redis operations (its connection and timeout). */
  constructor(
    private readonly ops: RedisOperations,
    private readonly keys: RedisKeys,
  ) {
    this.meta = new RedisSessionMetadata(ops, keys);
  }

  /** The metadata configuration the store recorded, read without writing; undefined when it recorded none (no session has a row). */
  private async recordedConfig(): Promise<MetaConfig | undefined> {
    if (this.recorded === undefined) {
      const [partitions, storeId] = await this.ops.read((r) => r.hmget(this.keys.config(), "partitions", "store_id"));
      if (partitions !== null) this.recorded = { partitions: Number(partitions), storeId: storeId ?? "" };
    }
    return this.recorded;
  }

  private async readSession(sessionId: string): Promise<SessionCopy | undefined> {
    const read = await readSnapshot(this.ops, this.keys, sessionId, ["modified_us", "meta"]);
    if (read === undefined || read.fields[0] === null) return undefined;
    const { format, payload } = read;
    const [modified, meta] = read.fields as [Buffer, Buffer | null];
    const config = meta === null ? undefined : await this.recordedConfig();
    const text = config === undefined ? null : await this.ops.read((r) => r.hget(this.meta.partitionKey(this.meta.partitionOf(config, sessionId), "rows"), sessionId));
    const row = text === null ? projectedRow(sessionId, payload) : ((row: StoredRow) => ({ activityState: row.a, estimatedBytes: row.b, metadata: row.m ?? undefined }))(JSON.parse(text) as StoredRow);
    return { sessionId, format, payload, modifiedAtMicros: Number(modified.toString("latin1")), ...row };
  }

  private async writeSession(config: MetaConfig, s: SessionCopy): Promise<void> {
    const op = this.ops.begin();
    const write = this.meta.write(config, s.sessionId, copiedProjection(s), op.id);
    await saveSnapshot(op, this.ops, this.keys, write, { sessionId: s.sessionId, format: s.format, payload: toBuffer(s.payload), mode: "import", modifiedUs: String(s.modifiedAtMicros) });
  }

  /** Sessions: ids from the List index (every partition). */
  readonly sessions: KindStore<SessionCopy> = {
    ids: async () => (await Promise.all(this.keys.layout.all().map((p) => this.ops.read((r) => r.zrange(this.keys.sessionIndex(p), "0", "-1"))))).flat(),
    read: (requests) => readEach(requests, (id) => this.readSession(id)),
    write: async (records) => {
      const config = await this.meta.config();
      await Promise.all(records.map((s) => this.writeSession(config, s)));
    },
  };

  private async readLineage(config: MetaConfig | undefined, id: string): Promise<LineageRecord | undefined> {
    if (config === undefined) return undefined;
    const p = this.meta.partitionOf(config, parseLineageCopyId(id).sessionId);
    const [record, state] = await this.ops.read((r) => Promise.all([r.hget(this.meta.partitionKey(p, "lineage:records"), id), r.hget(this.meta.partitionKey(p, "lineage:state"), id)]));
    return record === null || state === null ? undefined : decodeLineage(id, record, state);
  }

  private async writeLineage(config: MetaConfig, r: LineageRecord): Promise<void> {
    const p = this.meta.partitionOf(config, r.sessionId);
    const keys = ["lineage:records", "lineage:state", "lineage:ids", "lineage:related"].map((name) => this.meta.partitionKey(p, name));
    const id = lineageCopyId(r.sessionId, r.incarnation);
    const state = r.state === "retained" ? "retained" : `pruned:${r.deletedAtMicros ?? 0}`;
    const op = this.ops.begin();
    await op.script(PUT_LINEAGE, keys, [id, encodeLineage(r), state, ...relatedPrefixes(r.relationship)], op.record(this.keys.sessionOp(r.sessionId, op.id)));
  }

  /** Lineage records: ids from every partition's `lineage:records` hash (the record key is the copy id). */
  readonly lineage: KindStore<LineageRecord> = {
    ids: async () => {
      const config = await this.recordedConfig();
      if (config === undefined) return [];
      const parts = await Promise.all(Array.from({ length: config.partitions }, (_, p) => this.ops.read((r) => r.hkeys(this.meta.partitionKey(p, "lineage:records")))));
      return parts.flat();
    },
    read: async (requests) => {
      const config = await this.recordedConfig();
      return readEach(requests, (id) => this.readLineage(config, id));
    },
    write: async (records) => {
      const config = await this.meta.config();
      await Promise.all(records.map((r) => this.writeLineage(config, r)));
    },
  };
}
