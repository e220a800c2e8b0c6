/**
 * A record to append: an event (format tag and payload bytes, kept verbatim,
 * wire-contract.md section 3.3) or a gap marker with its reason (section 3.4).
 */
export type NewRecord = { kind: "event"; format: string; payload: Uint8Array } | { kind: "gap"; reason: string };

/**
 * A stored record with its position: the 1-based count of records up to and
 * including it, which is also the cursor position after it (section 3.8).
 */
export type StoredRecord = NewRecord & { position: number };

/** Where an append landed: the log's generation and the new record's position. */
export interface Appended {
  /** 16 lowercase hex characters, minted when the log was first appended to. */
  generation: string;
  position: number;
}

/**
 * One page of a log, read atomically: the generation and length at the time
 * of the read, and records strictly after the requested position, in order.
 */
export interface LogPage {
  generation: string;
  /** Number of records in the log (the position of its last record). */
  length: number;
  /** At most the requested count and about {@link PAGE_BYTES} of payload, but never empty when records exist after the position. */
  records: StoredRecord[];
}

/** Records per storage page (docs/DESIGN.md principle 5: reads never load a whole log). */
export const PAGE_RECORDS = 256;

/**
 * Payload bytes after which a page stops growing (at least one record is
 * always returned, however large), so one page stays around a mebibyte.
 */
export const PAGE_BYTES = 1024 * 1024;

/**
 * A hint carried by a change notice: the log's generation (null once it was
 * deleted) and its length after the change. Undefined when the source only
 * knows that something changed.
 */
export type ChangeHint = { generation: string | null; length: number } | undefined;

/**
 * Tells one process that logs changed, for follow wake-ups. One feed serves
 * every follower of the process and holds at most one backend connection of
 * its own (docs/DESIGN.md "Backends": a follower must not hold a connection).
 */
export interface ChangeFeed {
  /**
   * Starts reporting changes of `sessionId` (reference-counted). Resolves
   * once every change committed from now on, by this process or any other
   * sharing the store, will be reported; a reader that registers and then
   * reads therefore misses nothing.
   */
  watch(sessionId: string): Promise<void>;
  /** Drops one {@link watch} reference. */
  unwatch(sessionId: string): void;
  /**
   * Sets the listener: `change(sessionId, hint)` for a watched session, and
   * `changeAll()` when changes may have been missed (e.g. after a reconnect).
   */
  listen(change: (sessionId: string, hint: ChangeHint) => void, changeAll: () => void): void;
  /** Releases what the feed holds (timer, subscriber connection); called once at shutdown. */
  close(): void;
}

/**
 * The backend-neutral event log behind EventLogService (wire-contract.md
 * section 3). Implementations only store; validation, cursors and status
 * mapping live above. A rejection is an infrastructure failure, normally
 * a StoreFailure (storage/store-failure.ts: UNAVAILABLE or RESOURCE_EXHAUSTED;
 * it says when a write may have been applied), anything else INTERNAL.
 */
export interface EventLogStore {
  /**
   * Appends one record after every earlier append to the session, minting
   * the log's generation if the log has none (first append, or first after
   * the session was deleted). Resolves only once durable.
   */
  append(sessionId: string, record: NewRecord): Promise<Appended>;
  /**
   * Reads records after `afterPosition` (0 = from the start), at most
   * `maxRecords` and about {@link PAGE_BYTES}. Resolves undefined when the
   * session has no log (never appended, or deleted since).
   */
  readPage(sessionId: string, afterPosition: number, maxRecords: number): Promise<LogPage | undefined>;
  /** The process's shared change feed for this store. */
  readonly feed: ChangeFeed;
}
