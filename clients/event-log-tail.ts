import { encodeCursor, peekCursor } from "../common/event-cursor.js";
import { CursorExpiredError, CursorMalformedError } from "./errors.js";
import type { EventLogClient } from "./event-log-client.js";

/** What a cursor at a position tells about a log: records follow it, it is the end, or the log is shorter. */
type Probe = "before-end" | "end" | "beyond";

/** How often the search starts over when the log is reset under it (a reset expires every cursor). */
const RESTARTS = 3;

/**
 * The cursor after which the last `last` records of a session's log follow,
 * found without reading the log (issue 14: `events tail` on a long log): the
 * first record's cursor gives the log's generation, then ReadAfter calls with
 * `limit` 1 on `cur/1` cursors at chosen positions find the log's length by
 * doubling and bisection (about 2·log2(length) calls, each at most one
 * record). A cursor past the end is refused as `cursor_malformed`, a cursor at
 * the end yields nothing (wire-contract.md sections 3.6 and 3.8).
 *
 * @returns `""` (the beginning) when the log has at most `last` records or
 *   does not exist; the cursor otherwise; undefined when the driver's cursors
 *   are not `cur/1` envelopes (the caller must then read from the beginning).
 * @throws what {@link EventLogClient.readAfter} throws besides the cursor
 *   errors the search expects; CursorExpiredError when the log keeps being
 *   reset during the search.
 */
export async function tailCursor(log: EventLogClient, sessionId: string, last: number): Promise<string | undefined> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await search(log, sessionId, last);
    } catch (err) {
      if (!(err instanceof CursorExpiredError) || attempt >= RESTARTS) throw err;
    }
  }
}

async function search(log: EventLogClient, sessionId: string, last: number): Promise<string | undefined> {
  let first: string | undefined;
  for await (const r of log.readAfter(sessionId, { limit: 1 })) first = r.cursor;
  if (first === undefined) return "";
  const fields = peekCursor(first);
  if (fields === undefined || fields.sessionId !== sessionId || fields.position !== 1) return undefined;
  const at = (position: number) => encodeCursor(sessionId, fields.generation, position);
  const probe = async (position: number): Promise<Probe> => {
    try {
      for await (const _ of log.readAfter(sessionId, { cursor: at(position), limit: 1 })) return "before-end";
      return "end";
    } catch (err) {
      if (err instanceof CursorMalformedError) return "beyond";
      throw err;
    }
  };
  // Invariant: `known` is a position inside the log (≤ its length); `past` is beyond it, once found.
  let known = 1;
  let past: number | undefined;
  let length: number | undefined;
  for (let p = 2; length === undefined && past === undefined; p *= 2) {
    const r = await probe(p);
    if (r === "end") length = p;
    else if (r === "beyond") past = p;
    else known = p;
  }
  while (length === undefined) {
    if (past! - known <= 1) {
      length = known;
      break;
    }
    const mid = Math.floor((known + past!) / 2);
    const r = await probe(mid);
    if (r === "end") length = mid;
    else if (r === "beyond") past = mid;
    else known = mid;
  }
  return length <= last ? "" : at(length - last);
}
