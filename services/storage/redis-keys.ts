import type { StoreKind } from "./store-kinds.js";
import { DEFAULT_PARTITIONS, StoreLayout } from "./redis-layout.js";

/** Suffixes of the keys of one session (`session:{<tag>}:<id>...`), with what they hold (see {@link RedisKeys.kindOf}). */
const SESSION_KEY_SUFFIXES: ReadonlyArray<[string, StoreKind, "one" | "stream" | "none"]> = [
  [":snapshot", "sessions", "one"],
  [":payload", "sessions", "none"],
  [":lease", "leases", "one"],
  [":events:meta", "events", "none"],
  [":events", "events", "stream"],
];

/** Version of the key layout, the `v<N>:` after the operator's prefix. */
export const KEY_LAYOUT_VERSION = 2;

/**
 * Key layout in Redis (version {@link KEY_LAYOUT_VERSION}, issue 13). Every
 * key starts with the operator's prefix (`--redis-key-prefix`, default
 * `mecatl-drivers:`) followed by the layout version `v2:`, so another layout
 * can live beside this one (the upgrade from `v1:`, redis-upgrade.ts, reads
 * one and writes the other).
 *
 * Every key of a record carries the hash tag of the record's partition
 * ({@link StoreLayout}): a session's snapshot, event log, lease and
 * operation records; a schedule's hash and operation records; a fire
 * record. Each global index is split into one part per partition under the
 * partition's tag. A record and its index entries are thus on one slot, and
 * each script touches one slot (Redis Cluster). The record's id follows the
 * tag, then a suffix saying what the key holds; no suffix is the end of
 * another, so two ids never share a key.
 */
export class RedisKeys {
  /** The prefix every key of this store starts with, e.g. `mecatl-drivers:v2:`. */
  readonly base: string;
  /** The store's partitions and their hash tags. */
  readonly layout: StoreLayout;

  /**
   * @param prefix the operator's prefix; must not contain `{` or `}`.
   * @param partitions the store's partition count (as recorded in the store, see redis-store.ts).
   * @throws Error when the prefix contains a brace (it would break hash tags).
   */
  constructor(
    readonly prefix: string,
    partitions = DEFAULT_PARTITIONS,
  ) {
    if (/[{}]/.test(prefix)) throw new Error(`--redis-key-prefix ${JSON.stringify(prefix)} must not contain { or }`);
    this.base = `${prefix}v${KEY_LAYOUT_VERSION}:`;
    this.layout = new StoreLayout(partitions);
  }

  /** The key prefix of a record of `kind` with id `id`: `<base><kind>:{<partition tag>}:<id>`. */
  private record(kind: string, id: string): string {
    return `${this.base}${kind}:{${this.layout.tagOf(id)}}:${id}`;
  }

  /** The key of partition `p`'s part of the index `name` (`<base><name>:{<tag>}`). */
  private part(name: string, p: number): string {
    return `${this.base}${name}:{${this.layout.tag(p)}}`;
  }

  /**
   * Hash describing the store, under its own hash tag `{config}`:
   * `partitions` (N, fixed when the store is created), `store_id` (random;
   * part of every PageMetadata generation), `layout` (the key layout version
   * whose data is complete: absent while an upgrade from `v1:` runs) and
   * `migrated` (the metadata layout version whose backfill has finished).
   */
  config(): string {
    return `${this.base}store:{config}`;
  }

  /** String holding the recorded reply of one write of {@link config} (`OP_RECORD_LUA` in redis-script.ts); expires after `opRecordTtlMs`. */
  configOp(opId: string): string {
    return `${this.base}store:{config}:op:${opId}`;
  }

  /**
   * String written (with a one-second expiry, never read) by the probe that
   * checks whether Redis takes writes again after refusing them
   * (redis-write-refusal.ts), under the hash tag `tag` of the refused write,
   * so it lands on the same slot: `<base>probe:{<tag>}`.
   */
  probe(tag: string): string {
    return `${this.base}probe:{${tag}}`;
  }

  /** String held (with an expiry) by the one process upgrading the store from `v1:` (redis-upgrade.ts). */
  upgradeLock(): string {
    return `${this.base}store:{config}:upgrading`;
  }

  /**
   * Hash holding one session's snapshot: fields `format`, `payload` (absent
   * for a payload over 1 MiB, held in {@link snapshotChunks} instead),
   * `modified_us`, and, once its metadata row is written (issue 12), `meta`
   * (`1`), `owner` (hex owner scope or empty) and `incarnation` (empty for a
   * non-sessnap payload).
   */
  snapshot(sessionId: string): string {
    return `${this.record("session", sessionId)}:snapshot`;
  }

  /**
   * List holding the payload of a snapshot over 1 MiB in chunks, in order
   * (issue 11); its snapshot hash then has no `payload` field.
   */
  snapshotChunks(sessionId: string): string {
    return `${this.record("session", sessionId)}:payload`;
  }

  /**
   * List in which the Save of operation `opId` stages the chunks of a
   * snapshot over 1 MiB; its Save script renames it to
   * {@link snapshotChunks}. Expires if the Save never publishes it.
   */
  snapshotStage(sessionId: string, opId: string): string {
    return `${this.record("session", sessionId)}:stage:${opId}`;
  }

  /**
   * Hash holding the lease on one session id: `owner`, `token`, `expiry_us`
   * while held, and `high_water` (highest token ever granted) from the first
   * grant on. Not part of {@link sessionData}: the high-water mark must
   * outlive the session so tokens stay monotone (wire-contract.md section 4.3).
   */
  lease(sessionId: string): string {
    return `${this.record("session", sessionId)}:lease`;
  }

  /** Partition `p` of the List index: sorted set of the partition's session ids scored by save time in microseconds. */
  sessionIndex(p: number): string {
    return this.part("sessions", p);
  }

  /** The List index partition of `sessionId`. */
  sessionIndexOf(sessionId: string): string {
    return this.sessionIndex(this.layout.partitionOf(sessionId));
  }

  /**
   * Hash holding one session's event-log header: `gen` (the generation, 16
   * hex characters) and `n` (the number of records, the last position).
   */
  eventLogMeta(sessionId: string): string {
    return `${this.record("session", sessionId)}:events:meta`;
  }

  /** Stream holding one session's event-log records, entry id `0-<position>`. */
  eventLog(sessionId: string): string {
    return `${this.record("session", sessionId)}:events`;
  }

  /**
   * Pub/Sub channel on which changes of one session's event log are
   * announced: `<generation>:<length>` after an append, empty when the
   * session was deleted. A wake-up hint only; followers re-read the log.
   */
  eventLogChannel(sessionId: string): string {
    return `${this.record("session", sessionId)}:events:changed`;
  }

  /**
   * Every key that holds data of one session, deleted together when the
   * session is deleted (the event log travels with its session, docs/DESIGN.md
   * "Event log").
   */
  sessionData(sessionId: string): string[] {
    return [this.snapshot(sessionId), this.snapshotChunks(sessionId), this.eventLogMeta(sessionId), this.eventLog(sessionId)];
  }

  /**
   * String holding the recorded reply of one write operation on one session
   * (its snapshot, event log or lease), for the replay of
   * a retried operation (`OP_RECORD_LUA` in redis-script.ts); expires after
   * `opRecordTtlMs`. Not in
   * {@link sessionData}: it expires on its own.
   *
   * @param opId the operation id (16 hex characters) the server chose for the RPC.
   */
  sessionOp(sessionId: string, opId: string): string {
    return `${this.record("session", sessionId)}:op:${opId}`;
  }

  /** Channels told (with an empty message) when the session is deleted, so followers elsewhere notice. */
  sessionDeleteChannels(sessionId: string): string[] {
    return [this.eventLogChannel(sessionId)];
  }

  /**
   * Prefix of the keys of one partition of the session metadata index and
   * lineage records (issue 12). Every key of a partition carries the
   * partition's hash tag, that of the sessions it indexes, so a session's
   * writes touch one Redis Cluster slot. Keys under it: `rows` (hash: session id to row), `all` and
   * `owner:<hex>` (sorted sets of page members), `scopes` (hash: generation
   * and count per scope), `lineage:records`, `lineage:state` (hashes: record
   * key to record and to state), `lineage:ids` and `lineage:related` (sorted
   * sets indexing records by their own id and by the sessions they relate
   * to). See services/session-store/redis-metadata.ts.
   */
  sessionMetaPartition(partition: number): string {
    return `${this.part("session-meta", partition)}:`;
  }

  /**
   * Hash holding one schedule: fields `spec`, `owned`, `max_fires`, `state`,
   * and `ver`, the commit version (kept when the schedule is deleted so a
   * re-created schedule never repeats a version a stale reader saw).
   */
  schedule(name: string): string {
    return `${this.record("schedule", name)}:record`;
  }

  /**
   * String holding the recorded reply of one write operation on one
   * schedule (every schedule mutation is keyed by the schedule it changes);
   * expires after `opRecordTtlMs`.
   *
   * @param opId the operation id (16 hex characters) the server chose for the RPC.
   */
  scheduleOp(name: string, opId: string): string {
    return `${this.record("schedule", name)}:op:${opId}`;
  }

  /**
   * String deciding, once and for all, whether the schedule half of a fire
   * mutation (operation `opId`) committed (`c`) or was given up (`a`), beside
   * the schedule (services/schedule-store/redis-fire.ts).
   */
  scheduleFence(name: string, opId: string): string {
    return `${this.record("schedule", name)}:fence:${opId}`;
  }

  /** Partition `p` of the ListSchedules index: sorted set of the partition's schedule names, every score 0 (byte order). */
  scheduleIndex(p: number): string {
    return `${this.part("schedules", p)}:by-name`;
  }

  /** Partition `p` of the Due index: the partition's schedules that can be due, scored by NextFireAt in whole milliseconds. */
  scheduleDueIndex(p: number): string {
    return `${this.part("schedules", p)}:due`;
  }

  /**
   * Hash holding one fire record, in the partition of the fire id (LoadFire
   * knows only the id): `payload`, `ver` (commit version) and, while a
   * mutation holds it, `lk`, `lkt`, `lkw` (services/schedule-store/redis-fire.ts).
   */
  scheduleFire(fireId: string): string {
    return `${this.record("fire", fireId)}:record`;
  }

  /**
   * String holding the recorded reply of step `step` (`lock`, `apply`) of
   * write operation `opId` on a fire record (redis-fire.ts); expires after
   * `opRecordTtlMs`.
   */
  fireOp(fireId: string, opId: string, step: string): string {
    return `${this.record("fire", fireId)}:op:${opId}:${step}`;
  }

  /**
   * Partition `p` of the ListFires index: sorted set, every score 0, of
   * {@link fireIndexMember}s of the partition's fire records, so the fires of
   * one schedule are a byte range in each partition.
   */
  fireIndex(p: number): string {
    return `${this.part("fires", p)}:by-schedule`;
  }

  /** The partition of the ListFires index holding `fireId`'s entry (its record's). */
  fireIndexOf(fireId: string): string {
    return this.fireIndex(this.layout.partitionOf(fireId));
  }

  /**
   * True when `key` is one this layout defines for this store: under
   * {@link base}, either the store's own keys (configuration, its operation
   * records and upgrade lock, {@link copyProgress}) or a key with one of the
   * store's partition tags: an index partition (`sessions`, `session-meta`,
   * `schedules`, `fires`) or a record key (`session`, `schedule`, `fire`)
   * whose id belongs to that partition and whose suffix is one the layout
   * uses. `mecatl-drivers copy --replace` erases only such keys, so keys of
   * other applications that happen to start with the same text (with an
   * empty `--redis-key-prefix`: `v2:foreign`, `v2:session:{zz}:x`) are left alone.
   */
  owns(key: string): boolean {
    if (!key.startsWith(this.base)) return false;
    const rest = key.slice(this.base.length);
    if (rest === "copy-progress" || /^store:\{config\}(?::upgrading|:op:[^:]+)?$/s.test(rest)) return true;
    const tagged = /^([a-z-]+):\{([^}]*)\}(.*)$/s.exec(rest);
    if (tagged === null) return false;
    const [, head, tag, tail] = tagged as unknown as [string, string, string, string];
    this.tags ??= new Set(this.layout.all().map((p) => this.layout.tag(p)));
    if (!this.tags.has(tag)) return false;
    const index: Record<string, RegExp> = { sessions: /^$/, "session-meta": /^:/s, schedules: /^:(?:by-name|due)$/, fires: /^:by-schedule$/ };
    if (index[head] !== undefined) return index[head].test(tail);
    const record: Record<string, RegExp> = {
      session: /^:(.*?)(?::snapshot|:payload|:lease|:events:meta|:events|:stage:[^:]+|:op:[^:]+)$/s,
      schedule: /^:(.*?)(?::record|:op:[^:]+|:fence:[^:]+)$/s,
      fire: /^:(.*?)(?::record|:op:[^:]+:[^:]+)$/s,
    };
    const id = record[head]?.exec(tail)?.[1];
    return id !== undefined && this.layout.tagOf(id) === tag;
  }

  /** The partition tags of {@link layout}, built on first use by {@link owns}. */
  private tags: Set<string> | undefined;

  /** Where a `mecatl-drivers copy` into this store keeps its checkpoint. */
  copyProgress(): string {
    return `${this.base}copy-progress`;
  }

  /**
   * What a key of this store holds, for store measurements (issue 14): its
   * kind, and how it counts towards the kind's records: `one` record (a
   * snapshot, lease, schedule or fire hash), the entries of a `stream` (an
   * event log, counted with XLEN), or `none` (an index or header). A key this
   * layout does not define is `other`.
   */
  kindOf(key: string): { kind: StoreKind | "other"; counts: "one" | "stream" | "none" } {
    if (!key.startsWith(this.base)) return { kind: "other", counts: "none" };
    const rest = key.slice(this.base.length);
    const tagged = /^([a-z-]+):\{[^}]*\}(.*)$/s.exec(rest);
    if (tagged === null) return { kind: "other", counts: "none" };
    const [, kind, tail] = tagged as unknown as [string, string, string];
    if (kind === "sessions" && tail === "") return { kind: "sessions", counts: "none" };
    if (kind === "schedules" && (tail === ":by-name" || tail === ":due")) return { kind: "schedules", counts: "none" };
    if (kind === "fires" && tail === ":by-schedule") return { kind: "fires", counts: "none" };
    if (kind === "schedule" && tail.endsWith(":record")) return { kind: "schedules", counts: "one" };
    if (kind === "fire" && tail.endsWith(":record")) return { kind: "fires", counts: "one" };
    if (kind === "session") {
      if (/:stage:[0-9a-f]{16}$/.test(tail)) return { kind: "sessions", counts: "none" };
      for (const [suffix, k, counts] of SESSION_KEY_SUFFIXES) if (tail.endsWith(suffix) && !/:op:[0-9a-f]{16}$/.test(tail)) return { kind: k, counts };
    }
    return { kind: "other", counts: "none" };
  }
}

/** A ListFires index member: the schedule name's UTF-8 length as 8 hex digits, the name, then the fire id. */
export function fireIndexMember(scheduleName: string, fireId: string): string {
  return `${fireIndexPrefix(scheduleName)}${fireId}`;
}

/** The common start of every {@link fireIndexMember} of one schedule. */
export function fireIndexPrefix(scheduleName: string): string {
  return Buffer.byteLength(scheduleName, "utf8").toString(16).padStart(8, "0") + scheduleName;
}
