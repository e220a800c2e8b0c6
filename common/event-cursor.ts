/**
 * The event-log cursor envelope (wire-contract.md section 3.8), shared by the
 * service (which issues and strictly decodes cursors, services/event-log/cursor.ts)
 * and the operator CLI (which positions `events tail` near the end of a log).
 */

/** The envelope version every cursor carries in `v`. */
export const CURSOR_VERSION = "cur/1";

/** The fields of a `cur/1` cursor: session id, log generation, and position (records up to and including the cursor's record, 1-based). */
export interface CursorFields {
  sessionId: string;
  generation: string;
  position: number;
}

/**
 * Encodes a cursor as base64url without padding of the JSON object
 * `{"v":"cur/1","s":<session id>,"g":<generation>,"p":<position>}`, keys in
 * that order, every value a string (section 3.8). Never returns the empty
 * string, which would mean "the beginning".
 *
 * @param position record count up to and including the record, ≥ 1.
 */
export function encodeCursor(sessionId: string, generation: string, position: number): string {
  const json = JSON.stringify({ v: CURSOR_VERSION, s: sessionId, g: generation, p: String(position) });
  return Buffer.from(json, "utf8").toString("base64url");
}

/**
 * Reads the fields of a cursor a `cur/1` driver issued, leniently: no
 * canonical-form checks (the driver that receives a cursor does those).
 * Undefined for anything else, e.g. a cursor of a driver with another
 * envelope, which a client must then treat as opaque.
 */
export function peekCursor(text: string): CursorFields | undefined {
  try {
    const v = JSON.parse(Buffer.from(text, "base64url").toString("utf8")) as Record<string, unknown>;
    if (v.v !== CURSOR_VERSION || typeof v.s !== "string" || typeof v.g !== "string" || typeof v.p !== "string" || !/^[1-9][0-9]*$/.test(v.p)) return undefined;
    const position = Number(v.p);
    return Number.isSafeInteger(position) ? { sessionId: v.s, generation: v.g, position } : undefined;
  } catch {
    return undefined;
  }
}
