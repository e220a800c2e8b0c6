import { forEachElementBytes, forEachMemberBytes, matchKeyBytes, scanValueBytes } from "../json/json-scan.js";

/**
 * Content-free classification of a saved conversation (wire-contract.md
 * section 2.6): `draft` (no genuine user prompt yet), `active` (at least one),
 * or `""` (unknown).
 */
export type ActivityState = "" | "draft" | "active";

/** The activity values a write may send (wire-contract.md section 2.6). */
export const ACTIVITY_STATES: readonly ActivityState[] = ["", "draft", "active"];

/** Prefixes of the summaries compaction writes as user messages; they are not prompts. */
const COMPACTION_PREFIXES = ["[conversation compacted]", "[earlier turns summarised]"];

/** The harness's two no-progress nudges, compared byte-exact (they contain U+2014). */
const NUDGES = new Set([
  "Please continue. Make concrete progress on the task using your tools, or \u2014 if you are blocked or believe the task is complete \u2014 say so explicitly in a short message.",
  "Stop investigating now and do not run any more commands or tools. Using only the information you have already gathered, write your best final answer to the original task as a direct message now, even if it is incomplete or uncertain \u2014 note any gaps briefly. Do not plan further steps; deliver what you have.",
]);

/** Phrases that mark a `[harness note: ...]` user message as a background notice. */
const NOTICE_MARKERS = [
  " background subagent(s) finished: ",
  " background command(s) finished: ",
  " background subagent(s) still running: ",
  " background command(s) still running: ",
];

/**
 * The harness's genuine-prompt predicate for the text of a `user` message
 * (spec/session-metadata.md section 1.9, newest version): not a compaction
 * summary, not a no-progress nudge, not a background notice. Empty text (a
 * media-only prompt) is genuine.
 */
export function isGenuinePrompt(text: string): boolean {
  if (COMPACTION_PREFIXES.some((p) => text.startsWith(p))) return false;
  if (NUDGES.has(text)) return false;
  const notice = text.startsWith("[harness note: ") && text.endsWith("]") && NOTICE_MARKERS.some((m) => text.includes(m));
  return !notice;
}

const COMPACTION_PREFIX_BYTES = COMPACTION_PREFIXES.map((p) => Buffer.from(p, "utf8"));
const NUDGE_BYTES = [...NUDGES].map((n) => Buffer.from(n, "utf8"));

/** True when the bytes of `b` at `at` begin with `literal` (and hold it whole before `end`). */
function bytesAt(b: Uint8Array, at: number, end: number, literal: Uint8Array): boolean {
  if (end - at < literal.length) return false;
  let k = 0;
  while (k < literal.length && b[at + k] === literal[k]) k++;
  return k === literal.length;
}

/**
 * {@link isGenuinePrompt} of the JSON string literal spanning [start, end)
 * (quotes included), deciding on the raw bytes wherever they equal the text
 * (no escape in the part compared), and decoding the string only when an
 * escape could change the answer. A compaction prefix found byte for byte
 * settles it at once (the prefixes hold no backslash, so those bytes are
 * that text).
 */
function genuineTextAt(b: Buffer, start: number, end: number): boolean {
  const from = start + 1;
  const to = end - 1;
  if (COMPACTION_PREFIX_BYTES.some((p) => bytesAt(b, from, to, p))) return false;
  if (b.subarray(from, to).includes(0x5c)) return isGenuinePrompt(JSON.parse(b.toString("utf8", start, end)) as string);
  if (NUDGE_BYTES.some((n) => to - from === n.length && bytesAt(b, from, to, n))) return false;
  // Background notices are short; decode only a candidate.
  return b[from] !== 0x5b || b[to - 1] !== 0x5d || isGenuinePrompt(b.toString("utf8", from, to));
}

const USER_ROLE = Buffer.from('"user"', "latin1");

/** True when the JSON value spanning [start, end) is the string `user` (escapes decoded); compared on the bytes, without building a string, unless it has an escape. */
function isUserRole(b: Buffer, start: number, end: number): boolean {
  if (end - start === USER_ROLE.length && bytesAt(b, start, end, USER_ROLE)) return true;
  if (b[start] !== 0x22) return false;
  for (let k = start + 1; k < end - 1; k++) if (b[k] === 0x5c) return JSON.parse(b.toString("utf8", start, end)) === "user";
  return false;
}

/** The message fields the walk reads, in the order {@link matchKeyBytes} reports them. */
const MESSAGE_FIELDS = ["role", "text"];
const ROLE = 0;
const TEXT = 1;

/**
 * The harness's `ActivityOf` over the `messages` array of a `sessnap-json/1`
 * payload whose `[` is at byte `start` (spec/session-metadata.md section
 * 1.9): `active` as soon as one message has role `user` and genuine-prompt
 * text, otherwise `draft`. Messages are walked in place without building
 * them, and only the `role` and `text` of user messages are read; once a
 * genuine prompt is found the rest of the array is only skimmed to its end.
 * Elements that are not objects, and messages whose role or text is not a
 * string, are not prompts (a `null` or absent text is an empty, media-only
 * prompt).
 *
 * @returns the activity and the offset just past the array's `]`.
 * @throws JsonSyntaxError when the array is not valid JSON.
 */
export function walkMessages(payload: Uint8Array, start: number): { activity: ActivityState; end: number } {
  const b = Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength);
  let found = false;
  // Spans of the current message's role and text values (last one wins, as in Go); -1 when absent.
  let roleStart = -1;
  let roleEnd = -1;
  let textStart = -1;
  let textEnd = -1;
  const member = (keyStart: number, keyEnd: number, valueStart: number): number => {
    const valueEnd = scanValueBytes(b, valueStart, 2, "skim");
    const field = matchKeyBytes(b, keyStart, keyEnd, MESSAGE_FIELDS);
    if (field === ROLE) {
      roleStart = valueStart;
      roleEnd = valueEnd;
    } else if (field === TEXT) {
      textStart = b[valueStart] === 0x6e ? -1 : valueStart;
      textEnd = valueEnd;
    }
    return valueEnd;
  };
  const end = forEachElementBytes(b, start, (at) => {
    if (found || b[at] !== 0x7b) return scanValueBytes(b, at, 2, "skim");
    roleStart = textStart = -1;
    const messageEnd = forEachMemberBytes(b, at, member);
    if (roleStart >= 0 && isUserRole(b, roleStart, roleEnd)) found = textStart < 0 || (b[textStart] === 0x22 && genuineTextAt(b, textStart, textEnd));
    return messageEnd;
  });
  return { activity: found ? "active" : "draft", end };
}
