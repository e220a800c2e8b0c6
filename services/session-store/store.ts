import type { IndexScan } from "../storage/index-scan.js";

/**
 * A snapshot as stored: the format tag and payload bytes, kept verbatim
 * (wire-contract.md section 2.3).
 */
export interface StoredSnapshot {
  format: string;
  payload: Uint8Array;
}

/** One row of List: the id and its save time in microseconds since the Unix epoch. */
export interface StoredSessionInfo {
  sessionId: string;
  modifiedAtMicros: number;
}

/**
 * The backend-neutral session store behind SessionStoreService
 * (wire-contract.md section 2.5). Implementations only store; validation and
 * status mapping live in service.ts. Every write resolves only once durable.
 * Any rejection is an infrastructure failure (INTERNAL).
 */
export interface SessionStore {
  /** Upserts the snapshot and records the save time. */
  save(sessionId: string, snapshot: StoredSnapshot): Promise<void>;
  /**
   * Stores the snapshot only if the id is absent, atomically against every
   * other writer on the same store. Resolves false (and changes nothing) when
   * the id exists.
   */
  create(sessionId: string, snapshot: StoredSnapshot): Promise<boolean>;
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
   * Removes the snapshot and every other record of the session held in the
   * same store (its event log included). Unknown ids are a no-op.
   */
  delete(sessionId: string): Promise<void>;
}
