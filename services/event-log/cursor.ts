import { cursorMalformed } from "./log-error.js";
import { CURSOR_VERSION } from "../../common/event-cursor.js";
import { strictUtf8 } from "../../common/verbatim-utf8.js";

export { CURSOR_VERSION, encodeCursor } from "../../common/event-cursor.js";

/** A decoded cursor: the log generation it was issued under and the position after its record. */
export interface CursorPosition {
  /** 16 lowercase hex characters (8 random bytes), see {@link isGeneration}. */
  generation: string;
  /**
   * Number of records up to and including the cursor's record (1-based), so
   * the next record to read is `position + 1`. Same meaning on SQLite and Redis.
   */
  position: number;
}

const GENERATION = /^[0-9a-f]{16}$/;
const POSITION = /^[1-9][0-9]{0,15}$/;
const BASE64URL = /^[A-Za-z0-9_-]+$/;
const KEYS = ["g", "p", "s", "v"];

/** True for a generation as this driver mints them: 16 lowercase hex characters. */
export function isGeneration(text: string): boolean {
  return GENERATION.test(text);
}

/** The number of strings (keys and values) in `json`, a text JSON.parse accepted. */
function jsonStringCount(json: string): number {
  let count = 0;
  for (let i = 0; i < json.length; i++) {
    if (json[i] !== '"') continue;
    count++;
    // Skip to the string's closing quote, stepping over escapes.
    for (i++; json[i] !== '"'; i++) if (json[i] === "\\") i++;
  }
  return count;
}

/**
 * Decodes a cursor strictly, for `sessionId` (wire-contract.md sections 3.6
 * and 3.8). The empty cursor is the beginning of the log (undefined). The
 * generation is only checked for shape here: comparing it with the log's
 * current generation (expired) and checking the position exists in the log
 * (malformed) is the reader's job, since both need the store.
 *
 * @throws LogError `cursor_malformed` when the text is not canonical
 *   unpadded base64url, not UTF-8 JSON, not an object of exactly the four
 *   string fields v, s, g, p (each once), has a version other than `cur/1`, names another
 *   session, or has a generation or position this driver never issues.
 */
export function decodeCursor(text: string, sessionId: string): CursorPosition | undefined {
  if (text === "") return undefined;
  if (!BASE64URL.test(text) || text.length % 4 === 1) throw cursorMalformed("not unpadded base64url");
  const bytes = Buffer.from(text, "base64url");
  // Reject spellings Buffer would tolerate (stray low bits in the last character).
  if (bytes.toString("base64url") !== text) throw cursorMalformed("not canonical base64url");
  let envelope: unknown;
  let json: string;
  try {
    // A leading U+FEFF is kept, so JSON.parse refuses it: no cursor this driver issues starts with one.
    json = strictUtf8.decode(bytes);
    envelope = JSON.parse(json);
  } catch {
    throw cursorMalformed("not a JSON envelope");
  }
  if (typeof envelope !== "object" || envelope === null || Array.isArray(envelope)) throw cursorMalformed("not a JSON object");
  const fields = envelope as Record<string, unknown>;
  const keys = Object.keys(fields).sort();
  if (keys.length !== KEYS.length || keys.some((k, i) => k !== KEYS[i])) throw cursorMalformed("unexpected or missing fields");
  if (KEYS.some((k) => typeof fields[k] !== "string")) throw cursorMalformed("every field must be a string");
  // JSON.parse keeps the last of repeated keys; four string fields are exactly eight JSON strings.
  if (jsonStringCount(json) !== 2 * KEYS.length) throw cursorMalformed("a field appears more than once");
  const { v, s, g, p } = fields as Record<"v" | "s" | "g" | "p", string>;
  if (v !== CURSOR_VERSION) throw cursorMalformed(`unknown version ${JSON.stringify(v)}`);
  if (s !== sessionId) throw cursorMalformed("issued for another session");
  if (!isGeneration(g)) throw cursorMalformed("not a generation this driver issues");
  if (!POSITION.test(p) || Number(p) > Number.MAX_SAFE_INTEGER) throw cursorMalformed("not a position this driver issues");
  return { generation: g, position: Number(p) };
}
