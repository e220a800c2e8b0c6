import type { StoreKind } from "./store-kinds.js";

/** Suffixes of the keys of one session (`session:{id}...`), with what they hold (see {@link RedisKeys.kindOf}). */
const SESSION_KEY_SUFFIXES: ReadonlyArray<[string, StoreKind, "one" | "stream" | "none"]> = [
  ["}:snapshot", "sessions", "one"],
  ["}:payload", "sessions", "none"],
  ["}:lease", "leases", "one"],
  ["}:events:meta", "events", "none"],
  ["}:events", "events", "stream"],
];

/**
 * Key layout in Redis. Every key starts with the operator's prefix
 * (`--redis-key-prefix`, default `mecatl-drivers:`) followed by the schema
 * version `v1:`, so a future layout can live beside this one. Every key that
 * belongs to one session or one schedule carries that id in a hash tag
 * (`{...}`), so all of one session's keys share a Redis Cluster slot
 * (docs/DESIGN.md "Backends").
 */
export class RedisKeys {
  /** The prefix every key of this store starts with, e.g. `mecatl-drivers:v1:`. */
  readonly base: string;

  /**
   * @param prefix the operator's prefix; must not contain `{` or `}`.
   * @throws Error when the prefix contains a brace (it would break hash tags).
   */
  constructor(prefix: string) {
    if (/[{}]/.test(prefix)) throw new Error(`--redis-key-prefix ${JSON.stringify(prefix)} must not contain { or }`);
    this.base = `${prefix}v1:`;
  }

  /**
   * Hash holding one session's snapshot: fields `format`, `payload` (absent
   * for a payload over 1 MiB, held in {@link snapshotChunks} instead),
   * `modified_us`, and, once its metadata row is written (issue 12), `meta`
   * (`1`), `owner` (hex owner scope or empty) and `incarnation` (empty for a
   * non-sessnap payload).
   */
  snapshot(sessionId: string): string {
    return `${this.base}session:{${sessionId}}:snapshot`;
  }

  /**
   * List holding the payload of a snapshot over 1 MiB in chunks, in order
   * (issue 11); its snapshot hash then has no `payload` field.
   */
  snapshotChunks(sessionId: string): string {
    return `${this.base}session:{${sessionId}}:payload`;
  }

  /**
   * List in which the Save of operation `opId` stages the chunks of a
   * snapshot over 1 MiB; its Save script renames it to
   * {@link snapshotChunks}. Expires if the Save never publishes it.
   */
  snapshotStage(sessionId: string, opId: string): string {
    return `${this.base}session:{${sessionId}}:stage:${opId}`;
  }

  /**
   * Hash holding the lease on one session id: `owner`, `token`, `expiry_us`
   * while held, and `high_water` (highest token ever granted) from the first
   * grant on. Not part of {@link sessionData}: the high-water mark must
   * outlive the session so tokens stay monotone (wire-contract.md section 4.3).
   */
  lease(sessionId: string): string {
    return `${this.base}session:{${sessionId}}:lease`;
  }

  /** Sorted set of session ids scored by save time in microseconds (List index). */
  sessionIndex(): string {
    return `${this.base}sessions`;
  }

  /**
   * Hash holding one session's event-log header: `gen` (the generation, 16
   * hex characters) and `n` (the number of records, the last position).
   */
  eventLogMeta(sessionId: string): string {
    return `${this.base}session:{${sessionId}}:events:meta`;
  }

  /** Stream holding one session's event-log records, entry id `0-<position>`. */
  eventLog(sessionId: string): string {
    return `${this.base}session:{${sessionId}}:events`;
  }

  /**
   * Pub/Sub channel on which changes of one session's event log are
   * announced: `<generation>:<length>` after an append, empty when the
   * session was deleted. A wake-up hint only; followers re-read the log.
   */
  eventLogChannel(sessionId: string): string {
    return `${this.base}session:{${sessionId}}:events:changed`;
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
    return `${this.base}session:{${sessionId}}:op:${opId}`;
  }

  /** Channels told (with an empty message) when the session is deleted, so followers elsewhere notice. */
  sessionDeleteChannels(sessionId: string): string[] {
    return [this.eventLogChannel(sessionId)];
  }

  /**
   * Hash describing the session metadata index (issue 12), under its own hash
   * tag `{m-config}`: `partitions` (how
   * many partitions the index has; fixed when the store is first used),
   * `store_id` (random; part of every PageMetadata generation) and
   * `migrated` (the metadata layout version whose backfill has finished).
   */
  sessionMetaConfig(): string {
    return `${this.base}session-meta:{m-config}`;
  }

  /**
   * String holding the recorded reply of one write of the metadata index's
   * configuration (`OP_RECORD_LUA` in redis-script.ts), hash-tagged like
   * {@link sessionMetaConfig}; expires after `opRecordTtlMs`.
   */
  sessionMetaConfigOp(opId: string): string {
    return `${this.base}session-meta:{m-config}:op:${opId}`;
  }

  /**
   * Prefix of the keys of one partition of the session metadata index and
   * lineage records (issue 12). Every key of a partition carries the
   * partition's hash tag `{m<partition>}`, so a partition lives on one Redis
   * Cluster slot. Keys under it: `rows` (hash: session id to row), `all` and
   * `owner:<hex>` (sorted sets of page members), `scopes` (hash: generation
   * and count per scope), `lineage:records`, `lineage:state` (hashes: record
   * key to record and to state), `lineage:ids` and `lineage:related` (sorted
   * sets indexing records by their own id and by the sessions they relate
   * to). See services/session-store/redis-metadata.ts.
   */
  sessionMetaPartition(partition: number): string {
    return `${this.base}session-meta:{m${partition}}:`;
  }

  /**
   * Hash holding one schedule: fields `spec`, `owned`, `max_fires`, `state`,
   * and `ver`, the commit version (kept when the schedule is deleted so a
   * re-created schedule never repeats a version a stale reader saw).
   */
  schedule(name: string): string {
    return `${this.base}schedule:{${name}}`;
  }

  /**
   * String holding the recorded reply of one write operation on one
   * schedule (every schedule mutation, fire records included, is keyed by its
   * schedule's name); expires after `opRecordTtlMs`.
   *
   * @param opId the operation id (16 hex characters) the server chose for the RPC.
   */
  scheduleOp(name: string, opId: string): string {
    return `${this.base}schedule:{${name}}:op:${opId}`;
  }

  /**
   * Sorted set of the fire ids whose record names this schedule, every
   * score 0 so they are read in byte order, a page at a time (ListFires
   * index, issue 10).
   */
  scheduleFires(name: string): string {
    return `${this.base}schedule:{${name}}:fire-ids`;
  }

  /**
   * Sorted set of every schedule name, every score 0 so names are read in
   * byte order, a page at a time (ListSchedules index, issue 10).
   */
  scheduleIndex(): string {
    return `${this.base}schedules:by-name`;
  }

  /** Sorted set of the schedules that can be due, scored by NextFireAt in whole milliseconds (Due index). */
  scheduleDueIndex(): string {
    return `${this.base}schedules:due`;
  }

  /** Hash holding one fire record: fields `payload` and `ver` (commit version). */
  scheduleFire(fireId: string): string {
    return `${this.base}schedule-fire:{${fireId}}`;
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
    if (rest === "sessions") return { kind: "sessions", counts: "none" };
    if (rest === "schedules" || rest === "schedules:due") return { kind: "schedules", counts: "none" };
    if (rest.startsWith("schedule-fire:{") && rest.endsWith("}")) return { kind: "fires", counts: "one" };
    if (rest.startsWith("schedule:{")) {
      if (rest.endsWith("}")) return { kind: "schedules", counts: "one" };
      if (rest.endsWith("}:fires")) return { kind: "fires", counts: "none" };
    }
    if (rest.startsWith("session:{")) {
      if (rest.includes("}:stage:")) return { kind: "sessions", counts: "none" };
      for (const [suffix, kind, counts] of SESSION_KEY_SUFFIXES) if (rest.endsWith(suffix)) return { kind, counts };
    }
    return { kind: "other", counts: "none" };
  }
}
