import { decodeCursor, encodeCursor } from "./cursor.js";
import { cursorExpired, cursorMalformed, LogError } from "./log-error.js";
import type { FollowHub, Follower } from "./follow-hub.js";
import { PAGE_RECORDS, type EventLogStore, type LogPage, type StoredRecord } from "./store.js";

/** A ReadAfter request after validation (wire-contract.md section 3.6). */
export interface ReadAfterQuery {
  sessionId: string;
  /** As received; empty is the beginning of the log. */
  cursor: string;
  /** Total records for the call, gaps included; 0 is unbounded. */
  limit: number;
  follow: boolean;
}

/** One record as ReadAfter delivers it: the record, the cursor after it, and whether it arrived live. */
export interface DeliveredRecord {
  record: StoredRecord;
  cursor: string;
  live: boolean;
}

/**
 * Checks a page against what the reader knows and returns the generation to
 * use from now on (section 3.6: never coerce a cursor).
 *
 * @throws LogError `cursor_expired` when the reader holds a generation and
 *   the log is gone or has another one; `cursor_malformed` when the position
 *   lies beyond the log's end (a tampered cursor).
 */
function checkPage(page: LogPage | undefined, generation: string | undefined, position: number): string | undefined {
  if (page === undefined) {
    if (generation !== undefined) throw cursorExpired();
    return undefined;
  }
  if (generation !== undefined && page.generation !== generation) throw cursorExpired();
  if (position > page.length) throw cursorMalformed("names a position the log does not have");
  return page.generation;
}

/**
 * ReadAfter (wire-contract.md section 3.6): the records strictly after the
 * cursor, in order, each with the cursor after it, read page by page so memory
 * stays bounded whatever the log length. With `follow`, the reader is admitted
 * to the hub and registered for wake-ups BEFORE its first read; after draining
 * (records `live` false) it parks, and on every wake-up re-reads from its last
 * delivered position (records `live` true), so nothing is skipped or repeated
 * across the hand-over. The stream ends cleanly when `limit` is reached or
 * `signal` aborts (client cancel, shutdown).
 *
 * @throws LogError `cursor_malformed` or `cursor_expired` (also when the log
 *   is deleted while the follower is parked), `follow_capacity` before any
 *   storage work, `follow_lagging` when a live follower falls behind.
 */
export async function* readAfter(store: EventLogStore, hub: FollowHub, q: ReadAfterQuery, signal: AbortSignal): AsyncGenerator<DeliveredRecord> {
  const start = decodeCursor(q.cursor, q.sessionId);
  let generation = start?.generation;
  let position = start?.position ?? 0;
  let remaining = q.limit > 0 ? q.limit : Number.POSITIVE_INFINITY;
  const follower: Follower | undefined = q.follow ? await hub.admit(q.sessionId) : undefined;
  try {
    let live = false;
    for (;;) {
      const max = Math.min(PAGE_RECORDS, remaining);
      const page = follower !== undefined ? await follower.read(position, max) : await store.readPage(q.sessionId, position, max);
      generation = checkPage(page, generation, position);
      for (const record of page?.records ?? []) {
        follower?.throwIfLagged();
        yield { record, cursor: encodeCursor(q.sessionId, generation!, record.position), live };
        position = record.position;
        follower?.delivered(position);
        if (--remaining === 0) return;
      }
      if (page !== undefined && position < page.length) continue;
      if (follower === undefined) return;
      follower.generation = generation;
      follower.live = live = true;
      if (!(await follower.wait(signal))) return;
    }
  } finally {
    follower?.release();
  }
}

/**
 * Legacy Read (wire-contract.md section 3.5): every event of the session in
 * append order, gaps skipped, page by page. An unknown session is an empty
 * stream.
 *
 * @throws LogError `log_replaced` when the log is deleted or replaced while
 *   it is being streamed (the stream would otherwise mix two logs).
 */
export async function* readEvents(store: EventLogStore, sessionId: string): AsyncGenerator<StoredRecord & { kind: "event" }> {
  let generation: string | undefined;
  let position = 0;
  for (;;) {
    const page = await store.readPage(sessionId, position, PAGE_RECORDS);
    if (generation !== undefined && page?.generation !== generation) {
      throw new LogError("log_replaced", "the event log was deleted or replaced while it was being read; read it again");
    }
    if (page === undefined) return;
    generation = page.generation;
    for (const record of page.records) {
      position = record.position;
      if (record.kind === "event") yield record;
    }
    if (position >= page.length) return;
  }
}
