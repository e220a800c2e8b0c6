import type { CanonicalItem } from "../storage/copy/canonical.js";
import type { CopyChunk, KindFormat } from "../storage/copy/kind-store.js";
import type { LogPage, StoredRecord } from "./store.js";

/**
 * A chunk of one event log as `mecatl-drivers copy` moves it (issue 14): the
 * log's generation and length, and consecutive records with their
 * positions. A log is copied with its generation and every position kept, so
 * a cursor the old store issued reads on exactly where it left off on the new
 * one (wire-contract.md section 3.8).
 */
export interface EventLogChunk {
  sessionId: string;
  /** 16 lowercase hex characters. */
  generation: string;
  /** Records in the whole log (the position of its last record). */
  length: number;
  /** Consecutive records, the first at position `records[0].position`. */
  records: StoredRecord[];
}

/** Records one read of a log carries at most (and about 1 MiB of payload, the store's page size). */
export const LOG_CHUNK_RECORDS = 4096;

/**
 * Copy format of event logs: counts events (gaps included); the digest has
 * one item per record (session, generation, position and content) and one
 * per log for its header (session, generation, length), carried by the
 * chunk that starts at position 1.
 */
export const eventLogCopyFormat: KindFormat<EventLogChunk> = {
  kind: "events",
  id: (c) => c.sessionId,
  label: (id) => id,
  count: (c) => c.records.length,
  bytes: (c) => c.records.reduce((n, r) => n + (r.kind === "event" ? r.payload.byteLength : Buffer.byteLength(r.reason)), 0),
  items: (c) => {
    const items: CanonicalItem[] = c.records.map((r) =>
      r.kind === "event" ? [c.sessionId, c.generation, r.position, "event", r.format, r.payload] : [c.sessionId, c.generation, r.position, "gap", r.reason],
    );
    if (c.records[0]?.position === 1) items.push(["log", c.sessionId, c.generation, c.length]);
    return items;
  },
};

/**
 * The answer to a copy read of `sessionId` from one page of its log: the
 * chunk (undefined for a missing or empty page), and `next`, the position of
 * its last record while the log goes on.
 */
export function chunkOfPage(sessionId: string, page: LogPage | undefined): CopyChunk<EventLogChunk> {
  if (page === undefined || page.records.length === 0) return { record: undefined, next: undefined };
  const last = page.records.at(-1)!.position;
  return { record: { sessionId, generation: page.generation, length: page.length, records: page.records }, next: last < page.length ? last : undefined };
}
