import type { SessionRelationship } from "../../common/session-relationship.js";
import type { ActivityState } from "./activity.js";
import type { SessionMetadata } from "./projection.js";
import type { ProjectionSource } from "./projection-source.js";
import type { IndexScan } from "../storage/index-scan.js";

/**
 * A snapshot as stored: the format tag and payload bytes, kept verbatim
 * (wire-contract.md section 2.3).
 */
export interface StoredSnapshot {
  format: string;
  payload: Uint8Array;
  /**
   * Bytes before `payload` in its buffer that the reader may overwrite
   * (common/payload-headroom.ts): set by a store's Load for a large payload
   * it read into a buffer of its own, so that the answer is framed around
   * the payload where it lies. Absent: none.
   */
  headroom?: number;
}

/** One row of List: the id and its save time in microseconds since the Unix epoch. */
export interface StoredSessionInfo {
  sessionId: string;
  modifiedAtMicros: number;
}

/**
 * Where a PageMetadata page starts (spec/session-metadata.md section 4.2):
 * rows saved strictly before `beforeMicros`, and, when `tie` is given, rows
 * saved at exactly `tie.micros` whose id sorts byte-wise after
 * `tie.sessionId` (those come first).
 */
export interface MetadataBoundary {
  beforeMicros: number;
  tie?: { micros: number; sessionId: string };
}

/** A PageMetadata read as the store sees it (the service has validated and resolved the request). */
export interface MetadataPageQuery {
  /**
   * The rows eligible: `all`, or one owner's rows, named by the lowercase hex
   * of the owner's principal scope hash (spec/session-metadata.md section 3).
   */
  scope: { kind: "all" } | { kind: "owner"; ownerScopeHex: string };
  /** Where the page starts; undefined for the first page. */
  after?: MetadataBoundary;
  /** Rows wanted, at least 1. */
  limit: number;
  /** The generation of the request's cursor; when it differs from the scope's current one the store answers `restart`. */
  generation?: string;
}

/** One PageMetadata row as stored. `metadata` is undefined for a non-sessnap snapshot (id, save time and size only). */
export interface MetadataRow {
  sessionId: string;
  modifiedAtMicros: number;
  metadata: SessionMetadata | undefined;
  activityState: ActivityState;
  estimatedBytes: number;
}

/**
 * A PageMetadata answer, read in one consistent view of the store: `rows`
 * (at most the limit, in page order), whether more rows follow, the number
 * of rows in the scope, and the scope's generation (a string that changes
 * whenever a row enters, leaves or changes inside the scope, and never
 * repeats, not even across stores).
 */
export type MetadataPageAnswer = { restart: true } | { restart: false; rows: MetadataRow[]; more: boolean; total: number; generation: string };

/** A ReadLineage read (validated by the service; spec/session-metadata.md section 5.3). */
export interface LineageQuery {
  rootSessionId: string;
  rootIncarnation: string;
  /** 1 to 256. */
  limit: number;
  /** The exact-record selector. */
  record?: { sessionId: string; incarnation: string };
}

/** One lineage record (spec/session-metadata.md section 5.1). */
export interface LineageRecord {
  sessionId: string;
  incarnation: string;
  /** Never empty (`unknown` for a legacy snapshot). */
  kind: string;
  relationship: SessionRelationship;
  /** 32 bytes: the owner's principal scope hash. */
  ownerScope: Uint8Array;
  state: "retained" | "pruned";
  /** Microseconds since the epoch; set exactly when pruned. */
  deletedAtMicros: number | undefined;
}

/** A ReadLineage answer: records in wire order, cut to the limit, and whether more existed. */
export interface LineageAnswer {
  records: LineageRecord[];
  truncated: boolean;
}

/**
 * The backend-neutral session store behind SessionStoreService
 * (wire-contract.md section 2.5; issue 12). Implementations only store;
 * validation, projection and status mapping live in the service. Every write
 * resolves only once durable, and changes the snapshot, its metadata row,
 * its lineage records and the paging generations together or not at all.
 * A rejection is an infrastructure failure, normally a StoreFailure
 * (storage/store-failure.ts: UNAVAILABLE or RESOURCE_EXHAUSTED; it says when
 * a write may have been applied), anything else INTERNAL.
 */
export interface SessionStore {
  /**
   * Prepares the store before it serves its first call (issue 12): on Redis,
   * records the metadata index's configuration and backfills the metadata of
   * a store written by an earlier build; on SQLite there is nothing left to
   * do (the migration ran when the file was opened).
   *
   * @throws the store's error (a StoreFailure when Redis fails) when it cannot.
   */
  open(): Promise<void>;
  /**
   * Upserts the snapshot with its projection and records the save time. When
   * the session held another incarnation, that incarnation's lineage record
   * becomes `pruned`; the new one is `retained` (spec/session-metadata.md
   * section 5.2). `projection` may be a function computing it: the store
   * calls it once before the write is visible, and an error it throws is
   * the answer, nothing changed (see {@link ProjectionSource}).
   *
   * `signal`, when given, aborts once the caller has gone (cancelled, or its
   * deadline passed): a payload staged in chunks (over 1 MiB) that is still
   * waiting for its turn or being staged is then given up before its next
   * chunk or its publication, nothing written, and the call rejects with
   * the signal's reason. A Save already published stays.
   */
  save(sessionId: string, snapshot: StoredSnapshot, projection: ProjectionSource, signal?: AbortSignal): Promise<void>;
  /**
   * Stores the snapshot only if the id is absent, atomically against every
   * other writer on the same store. Resolves false (and changes nothing, not
   * even a generation) when the id exists. `signal` as for {@link save}.
   */
  create(sessionId: string, snapshot: StoredSnapshot, projection: ProjectionSource, signal?: AbortSignal): Promise<boolean>;
  /** The newest snapshot, or undefined for an unknown id. */
  load(sessionId: string): Promise<StoredSnapshot | undefined>;
  /**
   * Every stored id with its save time, read lazily in bounded pages
   * (issue 10), each id once, in an order fixed by the backend (SQLite: id
   * byte order; Redis: save time, then id). An id stored for the whole scan
   * is read; one saved or deleted meanwhile may or may not be.
   */
  scan(): IndexScan<StoredSessionInfo>;
  /**
   * Removes the snapshot, its metadata row and every other record of the
   * session held in the same store (its event log included); its lineage
   * record becomes `pruned` and is kept forever. Unknown ids are a no-op.
   */
  delete(sessionId: string): Promise<void>;
  /** One page of metadata rows, reading O(limit) index entries and no snapshot. */
  pageMetadata(query: MetadataPageQuery): Promise<MetadataPageAnswer>;
  /** The lineage records of a root incarnation, or the one selected record. */
  readLineage(query: LineageQuery): Promise<LineageAnswer>;
}
