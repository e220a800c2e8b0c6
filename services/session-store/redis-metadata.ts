/**
 * Session metadata rows, paging index and lineage records on Redis (issue 12).
 *
 * Layout. The index is split into the store's N partitions (storage/
 * redis-layout.ts: N fixed when the store is created and recorded in
 * `RedisKeys.config`); a session belongs to partition `sha256(id)[0..4] mod
 * N`. Every key of a partition carries the partition's hash tag, the tag of
 * its sessions' own keys (see `RedisKeys.sessionMetaPartition`):
 *
 * - `rows`: hash, session id to the row (JSON: activity, size, projected fields);
 * - `all`, `owner:<hex>`: sorted sets of page members, all with score 0, so
 *   they sort by member bytes. A member is the save time inverted
 *   (2^53 - microseconds) as 16 decimal digits, followed by the session id:
 *   byte order is page order (newest first, then id byte-wise), and a
 *   cursor is a `ZRANGE ... BYLEX` start, so a page reads O(limit) entries;
 * - `scopes`: hash, `gen:<scope>` and `n:<scope>` per scope (`all`,
 *   `owner:<hex>`): a generation bumped by every write that changes the
 *   scope in this partition, and the number of rows;
 * - `lineage:records` (hash, record key to the record's fixed fields),
 *   `lineage:state` (hash, record key to `retained` or `pruned:<us>`),
 *   `lineage:ids` (sorted set of record keys) and `lineage:related` (sorted
 *   set of `<related key>|<record key>` for each parent, origin and debug
 *   target a record names). A record key is the session id's UTF-8 length as
 *   8 hex digits, the id, then the incarnation. Records are never deleted.
 *
 * A page asks every partition for up to limit+1 members after the cursor
 * (one read-only script per partition, all at once), merges the N sorted
 * lists (k-way), then reads the rows of the chosen members from their
 * partitions, checking each partition is still at the generation its
 * members were read at. Its generation is the store id and the N partition
 * generations of the scope: a page is served only when none of the N
 * changed since the cursor was minted, and since a session lives in exactly
 * one partition, rows read from different partitions at slightly different
 * instants still never repeat or skip a row. A first page has no cursor to
 * restart: when writes keep changing its partitions between the two reads,
 * its last attempt reads each partition's members and their rows in one
 * script, so it is always answered.
 *
 * Atomicity. The Save/Create script writes the snapshot, its List index
 * entry and its partition together, in one script on one slot: the
 * session's keys carry its partition's hash tag (issue 13), so this holds on
 * a Redis Cluster as on a single Redis.
 *
 * Operation records (issue 9; storage/redis-script.ts `OP_RECORD_LUA`): every
 * write script here ends each path that writes with `return op_done(...)`
 * and is run with an operation record keyed by a key of the same session
 * (or, for the store's configuration, of the configuration), so a retried
 * write is applied once; paths that write nothing return without recording.
 */
import type { RedisKeys } from "../storage/redis-keys.js";
import { RedisOperations } from "../storage/redis-operation.js";
import { redisScript } from "../storage/redis-script.js";
import { configureStore } from "../storage/redis-store.js";
import { compareIdBytes } from "../../common/byte-order.js";
import { compareLineage } from "../../common/lineage-order.js";
import { directlyRelated, type SessionRelationship } from "../../common/session-relationship.js";
import { decodeMetadata, encodeMetadata, ownerScopeHex } from "./metadata-record.js";
import { projectStoredSnapshot, type SessionProjection } from "./projection.js";
import type { LineageAnswer, LineageQuery, LineageRecord, MetadataBoundary, MetadataPageAnswer, MetadataPageQuery, MetadataRow } from "./store.js";
import type { ActivityState } from "./activity.js";

/** Version of the metadata layout; a store whose `migrated` differs is backfilled at start. */
const LAYOUT_VERSION = "1";

/** 2^53: save times are stored inverted against it so that newer sorts first. */
const INVERT = 9_007_199_254_740_992n;

/**
 * Saves (or creates, or backfills) a snapshot with its metadata row and
 * lineage record, reading the time from the Redis server.
 * KEYS[1] snapshot hash, KEYS[2] the session's List index partition, KEYS[3] partition `rows`,
 * KEYS[4] partition `all`, KEYS[5] partition `scopes`, KEYS[6]
 * `lineage:records`, KEYS[7] `lineage:state`, KEYS[8] `lineage:ids`,
 * KEYS[9] `lineage:related` (all of the session's partition), KEYS[10] the
 * session's chunk list (`RedisKeys.snapshotChunks`), KEYS[11] this
 * operation's staging list (`RedisKeys.snapshotStage`).
 * ARGV[1] session id, ARGV[2] format, ARGV[3] payload (empty when staged),
 * ARGV[4] mode (`save`,
 * `create`: only if absent, `backfill`: only the metadata of a snapshot an
 * earlier build stored, unchanged since it was read, `import`: a save at the
 * time ARGV[11] instead of now, for `mecatl-drivers copy`), ARGV[5] prefix of the
 * partition's owner sets (`owner:<hex>` keys are built from it), ARGV[6]
 * owner scope hex or empty, ARGV[7] incarnation or empty (non-sessnap),
 * ARGV[8] row JSON, ARGV[9] record key prefix (id length and id), ARGV[10]
 * record JSON, ARGV[11] `modified_us` expected by `backfill` or given to
 * `import`, ARGV[12] the number of chunks staged in KEYS[11] (issue 11: a
 * payload over 1 MiB, published by renaming KEYS[11] to KEYS[10]) or empty
 * for a payload in ARGV[3], ARGV[13..] related prefixes (`<related key>|`).
 * Returns 1 when written (recorded), 0 when nothing was (create of an
 * existing id, or a backfill that found the session changed or already
 * projected; not recorded), -1 when KEYS[11] does not hold ARGV[12] chunks
 * (the staged payload expired; nothing written, not recorded).
 */
export const SAVE_PROJECTED = redisScript({
  name: "mecatlSessionSaveProjected",
  lua: `
local id, mode, ownerPrefix, owner, inc = ARGV[1], ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local staged = ARGV[12] ~= ''
local prev = redis.call('HMGET', KEYS[1], 'modified_us', 'owner', 'incarnation', 'meta')
if mode == 'create' and prev[1] then return 0 end
if mode == 'backfill' and (prev[1] ~= ARGV[11] or prev[4]) then return 0 end
if staged and redis.call('LLEN', KEYS[11]) ~= tonumber(ARGV[12]) then return -1 end
local us
if mode == 'backfill' then
  us = tonumber(prev[1])
elseif mode == 'import' then
  us = tonumber(ARGV[11])
else
  local t = redis.call('TIME')
  us = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local uss = string.format('%d', us)
local function member(u) return string.format('%016d', 9007199254740992 - u) .. id end
local function bump(scope, delta)
  redis.call('HINCRBY', KEYS[5], 'gen:' .. scope, 1)
  if delta ~= 0 then redis.call('HINCRBY', KEYS[5], 'n:' .. scope, delta) end
end
local had = prev[4] ~= false and prev[4] ~= nil
local oldOwner = (had and prev[2]) or ''
if had then
  local old = member(tonumber(prev[1]))
  redis.call('ZREM', KEYS[4], old)
  if oldOwner ~= '' then redis.call('ZREM', ownerPrefix .. oldOwner, old) end
end
bump('all', had and 0 or 1)
if oldOwner ~= '' then bump('owner:' .. oldOwner, oldOwner == owner and 0 or -1) end
if owner ~= '' and owner ~= oldOwner then bump('owner:' .. owner, 1) end
local m = member(us)
redis.call('ZADD', KEYS[4], 0, m)
if owner ~= '' then redis.call('ZADD', ownerPrefix .. owner, 0, m) end
redis.call('HSET', KEYS[3], id, ARGV[8])
if mode ~= 'backfill' then
  -- UNLINK frees a list of more than 64 chunks (over 32 MiB) in the background.
  redis.call('UNLINK', KEYS[10])
  if staged then
    redis.call('RENAME', KEYS[11], KEYS[10])
    redis.call('PERSIST', KEYS[10])
    redis.call('HDEL', KEYS[1], 'payload')
    redis.call('HSET', KEYS[1], 'format', ARGV[2], 'modified_us', uss)
  else
    redis.call('HSET', KEYS[1], 'format', ARGV[2], 'payload', ARGV[3], 'modified_us', uss)
  end
  redis.call('ZADD', KEYS[2], uss, id)
end
redis.call('HSET', KEYS[1], 'meta', '1', 'owner', owner, 'incarnation', inc)
if had and prev[3] and prev[3] ~= '' and prev[3] ~= inc then
  local key = ARGV[9] .. prev[3]
  if redis.call('HGET', KEYS[7], key) == 'retained' then redis.call('HSET', KEYS[7], key, 'pruned:' .. uss) end
end
if inc ~= '' then
  local key = ARGV[9] .. inc
  redis.call('HSET', KEYS[6], key, ARGV[10])
  redis.call('HSET', KEYS[7], key, 'retained')
  redis.call('ZADD', KEYS[8], 0, key)
  for i = 13, #ARGV do redis.call('ZADD', KEYS[9], 0, ARGV[i] .. key) end
end
return op_done(1)
`,
});

/**
 * Deletes a session and all of its records, takes its metadata row out of
 * its partition, prunes its lineage record (kept forever), then tells
 * whoever listens.
 * KEYS[1] the session's List index partition, KEYS[2] partition `rows`, KEYS[3] partition `all`,
 * KEYS[4] partition `scopes`, KEYS[5] `lineage:state`, KEYS[6..] every key
 * of the session, the snapshot hash first.
 * ARGV[1] session id, ARGV[2] prefix of the partition's owner sets, ARGV[3]
 * record key prefix (id length and id), ARGV[4] the command that announces
 * (`PUBLISH`, or `SPUBLISH` on a Redis Cluster), ARGV[5..] channels to
 * announce an empty message on (on the session's slot).
 * Returns 1 (recorded).
 */
export const DELETE_PROJECTED = redisScript({
  name: "mecatlSessionDeleteProjected",
  lua: `
local id = ARGV[1]
local prev = redis.call('HMGET', KEYS[6], 'modified_us', 'owner', 'incarnation', 'meta')
if prev[4] then
  local t = redis.call('TIME')
  local uss = string.format('%d', tonumber(t[1]) * 1000000 + tonumber(t[2]))
  local m = string.format('%016d', 9007199254740992 - tonumber(prev[1])) .. id
  redis.call('ZREM', KEYS[3], m)
  redis.call('HINCRBY', KEYS[4], 'gen:all', 1)
  redis.call('HINCRBY', KEYS[4], 'n:all', -1)
  if prev[2] and prev[2] ~= '' then
    redis.call('ZREM', ARGV[2] .. prev[2], m)
    redis.call('HINCRBY', KEYS[4], 'gen:owner:' .. prev[2], 1)
    redis.call('HINCRBY', KEYS[4], 'n:owner:' .. prev[2], -1)
  end
  redis.call('HDEL', KEYS[2], id)
  if prev[3] and prev[3] ~= '' then redis.call('HSET', KEYS[5], ARGV[3] .. prev[3], 'pruned:' .. uss) end
end
redis.call('ZREM', KEYS[1], id)
for i = 6, #KEYS do redis.call('UNLINK', KEYS[i]) end
for i = 5, #ARGV do redis.call(ARGV[4], ARGV[i], '') end
return op_done(1)
`,
});

/**
 * Reads one partition's part of a PageMetadata page: the scope's generation
 * and count, and the next members, each followed by its row when asked.
 * KEYS[1] the scope's sorted set, KEYS[2] `scopes`, KEYS[3] `rows`.
 * ARGV[1] scope name, ARGV[2] `ZRANGE BYLEX` start, ARGV[3] most members,
 * ARGV[4] `1` to follow each member with its row, else `0`.
 * Returns {generation, count, member1, [row1,] member2, [row2,] ...}.
 */
const PAGE_MEMBERS = redisScript({
  name: "mecatlSessionMetaPage",
  readOnly: true,
  lua: `
local out = {redis.call('HGET', KEYS[2], 'gen:' .. ARGV[1]) or '0', redis.call('HGET', KEYS[2], 'n:' .. ARGV[1]) or '0'}
for _, m in ipairs(redis.call('ZRANGE', KEYS[1], ARGV[2], '+', 'BYLEX', 'LIMIT', 0, tonumber(ARGV[3]))) do
  out[#out + 1] = m
  if ARGV[4] == '1' then out[#out + 1] = redis.call('HGET', KEYS[3], string.sub(m, 17)) end
end
return out
`,
});

/**
 * Reads the rows of the members a page chose from one partition, provided the
 * scope has not changed in the partition since the members were read.
 * KEYS[1] `rows`, KEYS[2] `scopes`.
 * ARGV[1] scope name, ARGV[2] the generation the members were read at,
 * ARGV[3..] session ids.
 * Returns {row1, row2, ...}, or 0 when the generation moved on.
 */
const PAGE_ROWS = redisScript({
  name: "mecatlSessionMetaRows",
  readOnly: true,
  lua: `
if (redis.call('HGET', KEYS[2], 'gen:' .. ARGV[1]) or '0') ~= ARGV[2] then return 0 end
local ids = {}
for i = 3, #ARGV do ids[#ids + 1] = ARGV[i] end
return redis.call('HMGET', KEYS[1], unpack(ids))
`,
});

/**
 * Attempts of a first page (session-metadata.md, paging: only a request with
 * a cursor may be ABORTED). The first ones read members, then rows; when a
 * partition changed in between, the page is read again, and the last attempt
 * reads each partition's members with their rows in one script, which cannot
 * be overtaken by a write.
 */
const PAGE_ATTEMPTS = 3;

/**
 * Reads the lineage records one partition's index names in a range.
 * KEYS[1] `lineage:ids` or `lineage:related`, KEYS[2] `lineage:records`,
 * KEYS[3] `lineage:state`.
 * ARGV[1], ARGV[2] `ZRANGE BYLEX` bounds, ARGV[3] bytes to cut from the
 * front of each member to get the record key.
 * Returns {key1, record1, state1, key2, ...}.
 */
const LINEAGE_RANGE = redisScript({
  name: "mecatlSessionLineageRange",
  readOnly: true,
  lua: `
local out = {}
for _, m in ipairs(redis.call('ZRANGE', KEYS[1], ARGV[1], ARGV[2], 'BYLEX')) do
  local key = string.sub(m, tonumber(ARGV[3]) + 1)
  local record = redis.call('HGET', KEYS[2], key)
  if record then
    out[#out + 1] = key
    out[#out + 1] = record
    out[#out + 1] = redis.call('HGET', KEYS[3], key)
  end
end
return out
`,
});

/** The first key of a record key range: the id's UTF-8 length as 8 hex digits, then the id. */
export function recordPrefix(sessionId: string): string {
  return Buffer.byteLength(sessionId, "utf8").toString(16).padStart(8, "0") + sessionId;
}

/** Splits a record key into its session id and incarnation. */
function splitRecordKey(key: string): { sessionId: string; incarnation: string } {
  const b = Buffer.from(key, "utf8");
  const len = Number.parseInt(b.toString("latin1", 0, 8), 16);
  return { sessionId: b.toString("utf8", 8, 8 + len), incarnation: b.toString("utf8", 8 + len) };
}

/** The related-index prefix of records whose parent, origin or debug target is (id, incarnation). */
export function relatedPrefix(sessionId: string, incarnation: string): string {
  return `${recordPrefix(sessionId)}|${incarnation}|`;
}

/** The related-index prefixes of a record with relationship `rel`: one per parent, origin and debug target it names with an incarnation. */
export function relatedPrefixes(rel: SessionRelationship): string[] {
  return [
    [rel.parentSessionId, rel.parentIncarnation],
    [rel.originSessionId, rel.originIncarnation],
    [rel.debugTargetSessionId, rel.debugTargetIncarnation],
  ]
    .filter(([id, inc]) => id !== "" && inc !== "")
    .map(([id, inc]) => relatedPrefix(id!, inc!));
}

/** A byte string that sorts after every member starting with `prefix` (ZRANGE BYLEX upper bound). */
function rangeEnd(prefix: string): Buffer {
  return Buffer.concat([Buffer.from(`[${prefix}`, "utf8"), Buffer.of(0xff)]);
}

/** A page member: the inverted save time as 16 digits, then the id. */
function pageMember(micros: number, sessionId: string): string {
  return (INVERT - BigInt(micros)).toString().padStart(16, "0") + sessionId;
}

/** The `ZRANGE BYLEX` start of a page (see store.ts MetadataBoundary). */
function lexStart(after: MetadataBoundary | undefined): string {
  if (after === undefined) return "-";
  if (after.tie !== undefined) return `(${pageMember(after.tie.micros, after.tie.sessionId)}`;
  return `[${pageMember(after.beforeMicros - 1, "")}`;
}

/** One partition's part of a page, as {@link PAGE_MEMBERS} answered it. */
interface PartitionPage {
  generation: string;
  count: number;
  /** Page members, in byte order. */
  members: string[];
  /** The stored row (JSON) of each member, when read with the members. */
  rows?: string[];
}

/** Splits a {@link PAGE_MEMBERS} reply (`withRows`: each member followed by its row). */
function partitionPage(reply: string[], withRows: boolean): PartitionPage {
  const rest = reply.slice(2);
  const page: PartitionPage = { generation: reply[0]!, count: Number(reply[1]), members: withRows ? rest.filter((_, i) => i % 2 === 0) : rest };
  if (withRows) page.rows = rest.filter((_, i) => i % 2 === 1);
  return page;
}

/** A member a page chose: its partition and its place in that partition's members. */
interface ChosenMember {
  partition: number;
  index: number;
  member: string;
}

/**
 * k-way merge of the partitions' member lists (each sorted): the first
 * `count` members in byte order, with where each came from.
 */
function mergeMembers(parts: PartitionPage[], count: number): ChosenMember[] {
  const heads = parts.map(() => 0);
  const out: ChosenMember[] = [];
  while (out.length < count) {
    let best = -1;
    for (let p = 0; p < parts.length; p++) {
      if (heads[p]! < parts[p]!.members.length && (best < 0 || compareIdBytes(parts[p]!.members[heads[p]!]!, parts[best]!.members[heads[best]!]!) < 0)) best = p;
    }
    if (best < 0) break;
    out.push({ partition: best, index: heads[best]!, member: parts[best]!.members[heads[best]!]! });
    heads[best]! += 1;
  }
  return out;
}

/** The page row of `member` from its stored row (JSON). */
function metadataRow(member: string, stored: string): MetadataRow {
  const row = JSON.parse(stored) as StoredRow;
  return {
    sessionId: member.slice(16),
    modifiedAtMicros: Number(INVERT - BigInt(member.slice(0, 16))),
    metadata: row.m === null ? undefined : decodeMetadata(row.m),
    activityState: row.a,
    estimatedBytes: row.b,
  };
}

/** A row as kept in a partition's `rows` hash. */
interface StoredRow {
  a: ActivityState;
  b: number;
  m: string | null;
}

/** The fixed fields of a lineage record as kept in `lineage:records`. */
interface StoredRecord {
  kind: string;
  relationship: SessionRelationship;
  ownerScope: string;
}

/**
 * A lineage record from its record key and the values of `lineage:records`
 * and `lineage:state` under it.
 *
 * @throws SyntaxError when the stored record is not JSON (a corrupt store).
 */
export function decodeLineage(key: string, record: string, state: string): LineageRecord {
  const fixed = JSON.parse(record) as StoredRecord;
  return {
    ...splitRecordKey(key),
    kind: fixed.kind,
    relationship: { ...fixed.relationship, branchIndex: fixed.relationship.branchIndex ?? undefined },
    ownerScope: Buffer.from(fixed.ownerScope, "hex"),
    state: state === "retained" ? "retained" : "pruned",
    deletedAtMicros: state === "retained" ? undefined : Number(state.slice("pruned:".length)),
  };
}

/** The form a lineage record's fixed fields are kept in under `lineage:records` (see {@link decodeLineage}). */
export function encodeLineage(r: LineageRecord): string {
  return JSON.stringify({ kind: r.kind, relationship: r.relationship, ownerScope: Buffer.from(r.ownerScope).toString("hex") } satisfies StoredRecord);
}

/** The store-wide facts every call needs, read (and, the first time, written) at start. */
export interface MetaConfig {
  partitions: number;
  storeId: string;
}

/**
 * The metadata side of the Redis session store: partition keys, the start-up
 * check and backfill, PageMetadata and ReadLineage reads, and the extra KEYS
 * and ARGV of the Save/Create/Delete scripts.
 */
export class RedisSessionMetadata {
  private ready: Promise<MetaConfig> | undefined;

  /** The configuration and backfill's operations: derived data a later start writes again, so no WAIT for replicas. */
  private readonly startOps: RedisOperations;

  constructor(
    private readonly ops: RedisOperations,
    private readonly keys: RedisKeys,
  ) {
    this.startOps = new RedisOperations(ops.redis, ops.timeoutMs, false);
  }

  /**
   * The store's partition count and id, after the upgrade backfill: the
   * first call of a process records the id if the store has none (the
   * partition count is the store's, `RedisKeys.layout`) and, when the store was written by a
   * build without metadata, projects every session the List index names
   * whose snapshot carries no metadata yet (same projection as Save; a
   * payload today's Save would refuse becomes a non-sessnap row), then marks
   * the store migrated. Safe to run from several processes at once: each
   * session is backfilled at most once, and never over a newer Save. A
   * failure is retried by the next call.
   *
   * @throws the Redis error of the failed step.
   */
  config(): Promise<MetaConfig> {
    if (this.ready === undefined) {
      this.ready = this.start();
      this.ready.catch(() => (this.ready = undefined));
    }
    return this.ready;
  }

  private configure(migrated: string): ReturnType<typeof configureStore> {
    return configureStore(this.startOps, this.keys, { partitions: String(this.keys.layout.partitions), migrated });
  }

  private async start(): Promise<MetaConfig> {
    const [, storeId, , migrated] = await this.configure("");
    const config = { partitions: this.keys.layout.partitions, storeId };
    if (migrated !== LAYOUT_VERSION) {
      await this.backfill(config);
      await this.configure(LAYOUT_VERSION);
    }
    return config;
  }

  private async backfill(config: MetaConfig): Promise<void> {
    for (const p of this.keys.layout.all()) await this.backfillPartition(config, p);
  }

  private async backfillPartition(config: MetaConfig, partition: number): Promise<void> {
    const batch = 256;
    for (let from = 0; ; from += batch) {
      const ids = await this.ops.read((r) => r.zrange(this.keys.sessionIndex(partition), String(from), String(from + batch - 1)));
      await Promise.all(
        ids.map(async (id) => {
          const [payload, modified, meta] = await this.ops.read((r) => r.hmgetBuffer(this.keys.snapshot(id), "payload", "modified_us", "meta"));
          // (A payload held in chunks was saved by this build, with its metadata.)
          if (payload === null || modified === null || meta !== null) return;
          const op = this.startOps.begin();
          const { keys, args } = this.write(config, id, projectStoredSnapshot(id, payload), op.id);
          await op.script(SAVE_PROJECTED, keys, [id, "", "", "backfill", ...args(modified.toString())], op.record(this.keys.sessionOp(id, op.id)));
        }),
      );
      if (ids.length < batch) return;
    }
  }

  /** The partition of a session (StoreLayout.partitionOf: the first 4 bytes of SHA-256 of its id, modulo the partition count). */
  partitionOf(_config: MetaConfig, sessionId: string): number {
    return this.keys.layout.partitionOf(sessionId);
  }

  /** The key `name` (`rows`, `lineage:records`, ...) of partition `p`. */
  partitionKey(p: number, name: string): string {
    return this.keys.sessionMetaPartition(p) + name;
  }

  /**
   * KEYS and the projection's ARGV (ARGV[5] on) of {@link SAVE_PROJECTED}
   * for `sessionId`, written by operation `opId`. `args` takes the
   * `modified_us` a backfill expects or an import gives, and the number of
   * chunks staged (issue 11).
   */
  write(config: MetaConfig, sessionId: string, projection: SessionProjection, opId: string): { keys: string[]; args: (expectedModified?: string, stagedChunks?: string) => string[] } {
    const p = this.partitionOf(config, sessionId);
    const k = (name: string) => this.partitionKey(p, name);
    const keys = [
      this.keys.snapshot(sessionId),
      this.keys.sessionIndexOf(sessionId),
      ...["rows", "all", "scopes", "lineage:records", "lineage:state", "lineage:ids", "lineage:related"].map(k),
      this.keys.snapshotChunks(sessionId),
      this.keys.snapshotStage(sessionId, opId),
    ];
    const m = projection.metadata;
    const row: StoredRow = { a: projection.activityState, b: projection.estimatedBytes, m: m === undefined ? null : encodeMetadata(m) };
    const record: StoredRecord | undefined = m === undefined ? undefined : { kind: m.kind, relationship: m.relationship, ownerScope: Buffer.from(m.ownerScope).toString("hex") };
    const related = m === undefined ? [] : relatedPrefixes(m.relationship);
    return {
      keys,
      args: (expectedModified = "", stagedChunks = "") => [
        k("owner:"),
        ownerScopeHex(m) ?? "",
        m?.incarnation ?? "",
        JSON.stringify(row),
        recordPrefix(sessionId),
        record === undefined ? "" : JSON.stringify(record),
        expectedModified,
        stagedChunks,
        ...related,
      ],
    };
  }

  /** KEYS (before the session's own keys) and ARGV (before the channels) of {@link DELETE_PROJECTED}. */
  delete(config: MetaConfig, sessionId: string): { keys: string[]; args: string[] } {
    const p = this.partitionOf(config, sessionId);
    const k = (name: string) => this.partitionKey(p, name);
    return { keys: [this.keys.sessionIndexOf(sessionId), k("rows"), k("all"), k("scopes"), k("lineage:state")], args: [sessionId, k("owner:"), recordPrefix(sessionId)] };
  }

  /**
   * One PageMetadata page, in two reads: every partition's generation, count
   * and next limit+1 members after the boundary, k-way merged; then the rows
   * of the chosen members, from their partitions, each checked to be at the
   * generation its members were read at. `restart` when a partition's
   * generation of the scope differs from the cursor's. A first page is never
   * restarted (session-metadata.md, paging): when its rows changed in
   * between, it is read again, and its last attempt reads each partition's
   * members with their rows in one read (more rows, but no gap to overtake).
   */
  async page(q: MetadataPageQuery): Promise<MetadataPageAnswer> {
    const config = await this.config();
    const scope = q.scope.kind === "all" ? "all" : `owner:${q.scope.ownerScopeHex}`;
    const start = lexStart(q.after);
    for (let attempt = 1; ; attempt++) {
      const withRows = q.generation === undefined && attempt >= PAGE_ATTEMPTS;
      const parts = await Promise.all(
        Array.from({ length: config.partitions }, async (_, p) => {
          const keys = [this.partitionKey(p, scope), this.partitionKey(p, "scopes"), this.partitionKey(p, "rows")];
          return partitionPage((await this.ops.readScript(PAGE_MEMBERS, keys, [scope, start, q.limit + 1, withRows ? 1 : 0])) as string[], withRows);
        }),
      );
      const generation = `${config.storeId}.${parts.map((r) => r.generation).join(".")}`;
      if (q.generation !== undefined && q.generation !== generation) return { restart: true };
      const total = parts.reduce((n, r) => n + r.count, 0);
      const chosen = mergeMembers(parts, q.limit + 1);
      const shown = chosen.slice(0, q.limit);
      const stored = withRows ? shown.map((c) => parts[c.partition]!.rows![c.index]!) : await this.storedRows(scope, parts, shown);
      if (stored !== undefined) return { restart: false, rows: shown.map((c, i) => metadataRow(c.member, stored[i]!)), more: chosen.length > q.limit, total, generation };
      if (q.generation !== undefined) return { restart: true };
    }
  }

  /** The stored rows (JSON) of `chosen` members, in order; undefined when a partition changed since its members were read. */
  private async storedRows(scope: string, parts: PartitionPage[], chosen: ChosenMember[]): Promise<string[] | undefined> {
    const byPartition = new Map<number, string[]>();
    for (const c of chosen) byPartition.set(c.partition, [...(byPartition.get(c.partition) ?? []), c.member.slice(16)]);
    const found = new Map<string, string>();
    const replies = await Promise.all(
      [...byPartition].map(async ([p, ids]) => {
        const reply = await this.ops.readScript(PAGE_ROWS, [this.partitionKey(p, "rows"), this.partitionKey(p, "scopes")], [scope, parts[p]!.generation, ...ids]);
        if (!Array.isArray(reply)) return false;
        ids.forEach((id, i) => found.set(id, reply[i] as string));
        return true;
      }),
    );
    if (replies.includes(false)) return undefined;
    return chosen.map(({ member }) => found.get(member.slice(16))!);
  }

  private async range(p: number, index: string, min: string, max: Buffer, cut: number): Promise<LineageRecord[]> {
    const flat = (await this.ops.readScript(
      LINEAGE_RANGE,
      [this.partitionKey(p, index), this.partitionKey(p, "lineage:records"), this.partitionKey(p, "lineage:state")],
      [min, max, cut],
    )) as string[];
    const out: LineageRecord[] = [];
    for (let i = 0; i + 2 < flat.length; i += 3) out.push(decodeLineage(flat[i]!, flat[i + 1]!, flat[i + 2]!));
    return out;
  }

  /**
   * ReadLineage (spec/session-metadata.md section 5.3): the root id's records
   * from its partition, and the records related to the root incarnation from
   * every partition's related index (checked against the records
   * themselves), ordered and cut to the limit; or the one selected record.
   */
  async lineage(q: LineageQuery): Promise<LineageAnswer> {
    const config = await this.config();
    const related = (r: LineageRecord) => directlyRelated(r.relationship, q.rootSessionId, q.rootIncarnation);
    if (q.record !== undefined) {
      const key = recordPrefix(q.record.sessionId) + q.record.incarnation;
      const found = await this.range(this.partitionOf(config, q.record.sessionId), "lineage:ids", `[${key}`, Buffer.from(`[${key}`, "utf8"), 0);
      return { records: found.filter(related), truncated: false };
    }
    const own = recordPrefix(q.rootSessionId);
    const rel = relatedPrefix(q.rootSessionId, q.rootIncarnation);
    const lists = await Promise.all([
      this.range(this.partitionOf(config, q.rootSessionId), "lineage:ids", `[${own}`, rangeEnd(own), 0),
      ...Array.from({ length: config.partitions }, (_, p) => this.range(p, "lineage:related", `[${rel}`, rangeEnd(rel), Buffer.byteLength(rel, "utf8"))),
    ]);
    const seen = new Set<string>();
    const candidates = lists.flat().filter((r) => {
      const key = `${r.sessionId}\u0000${r.incarnation}`;
      if (seen.has(key) || (r.sessionId !== q.rootSessionId && !related(r))) return false;
      seen.add(key);
      return true;
    });
    candidates.sort((a, b) => compareLineage(q.rootSessionId, a, b));
    return { records: candidates.slice(0, q.limit), truncated: candidates.length > q.limit };
  }
}
