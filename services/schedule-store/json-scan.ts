/**
 * A small strict JSON scanner that finds the members of an object and the
 * exact source span of each member's value, without building values. The
 * schedule store uses it to keep a schedule's `Spec` object as the exact text
 * the client sent (wire-contract.md section 5.4; DESIGN.md principle 2) while
 * reading and rewriting only the keys it owns.
 *
 * The grammar is RFC 8259, as Go's `encoding/json` accepts it: no comments,
 * no trailing commas, no leading byte-order mark, control characters only as
 * escapes, numbers without leading zeros. Nesting deeper than
 * {@link MAX_JSON_DEPTH} is refused, as Go refuses it.
 */

/** Deepest nesting of arrays and objects accepted (the same bound Go's decoder uses). */
export const MAX_JSON_DEPTH = 10_000;

/** The text is not JSON; `offset` is the UTF-16 index where scanning stopped. */
export class JsonSyntaxError extends Error {
  override name = "JsonSyntaxError";
  constructor(
    readonly problem: string,
    readonly offset: number,
  ) {
    super(`${problem} at offset ${offset}`);
  }
}

/** One member of a scanned object: its decoded key and the span of its raw value. */
export interface JsonMember {
  /** The key with escapes decoded. */
  key: string;
  /** Index of the value's first character. */
  valueStart: number;
  /** Index just past the value's last character. */
  valueEnd: number;
}

/** The members of one object, in source order, and the object's own span. */
export interface JsonObject {
  members: JsonMember[];
  /** Index of the opening `{`. */
  start: number;
  /** Index just past the closing `}`. */
  end: number;
}

const OBJECT = 1;
const ARRAY = 2;

function skipSpace(t: string, i: number): number {
  for (;;) {
    const c = t.charCodeAt(i);
    if (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) i++;
    else return i;
  }
}

function isDigit(c: number): boolean {
  return c >= 0x30 && c <= 0x39;
}

function isHex(c: number): boolean {
  return isDigit(c) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66);
}

/** Scans a string literal starting at its opening quote; returns the index after the closing quote. */
function scanString(t: string, i: number): number {
  if (t.charCodeAt(i) !== 0x22) throw new JsonSyntaxError("expected a string", i);
  i++;
  for (;;) {
    if (i >= t.length) throw new JsonSyntaxError("unterminated string", i);
    const c = t.charCodeAt(i);
    if (c === 0x22) return i + 1;
    if (c < 0x20) throw new JsonSyntaxError("control character in string", i);
    if (c !== 0x5c) {
      i++;
      continue;
    }
    const e = t.charCodeAt(i + 1);
    if (e === 0x75) {
      for (let k = 2; k < 6; k++) if (!isHex(t.charCodeAt(i + k))) throw new JsonSyntaxError("bad \\u escape", i);
      i += 6;
    } else if (e === 0x22 || e === 0x5c || e === 0x2f || e === 0x62 || e === 0x66 || e === 0x6e || e === 0x72 || e === 0x74) {
      i += 2;
    } else {
      throw new JsonSyntaxError("bad escape", i);
    }
  }
}

function scanDigits(t: string, i: number): number {
  if (!isDigit(t.charCodeAt(i))) throw new JsonSyntaxError("expected a digit", i);
  while (isDigit(t.charCodeAt(i))) i++;
  return i;
}

/** Scans a number literal; returns the index after it. */
function scanNumber(t: string, i: number): number {
  if (t.charCodeAt(i) === 0x2d) i++;
  if (t.charCodeAt(i) === 0x30) i++;
  else i = scanDigits(t, i);
  if (t.charCodeAt(i) === 0x2e) i = scanDigits(t, i + 1);
  const e = t.charCodeAt(i);
  if (e === 0x65 || e === 0x45) {
    i++;
    const s = t.charCodeAt(i);
    if (s === 0x2b || s === 0x2d) i++;
    i = scanDigits(t, i);
  }
  return i;
}

function scanLiteral(t: string, i: number, word: string): number {
  if (!t.startsWith(word, i)) throw new JsonSyntaxError("expected a value", i);
  return i + word.length;
}

/** Scans `"key" :` starting at the quote; returns the index after the colon. */
function scanKeyColon(t: string, i: number): number {
  i = skipSpace(t, scanString(t, i));
  if (t.charCodeAt(i) !== 0x3a) throw new JsonSyntaxError("expected ':' after object key", i);
  return skipSpace(t, i + 1);
}

/** Scans one scalar (string, number, literal) at `i` (no leading space); returns the index after it. */
function scanScalar(t: string, i: number): number {
  const c = t.charCodeAt(i);
  if (c === 0x22) return scanString(t, i);
  if (c === 0x2d || isDigit(c)) return scanNumber(t, i);
  if (c === 0x74) return scanLiteral(t, i, "true");
  if (c === 0x66) return scanLiteral(t, i, "false");
  if (c === 0x6e) return scanLiteral(t, i, "null");
  throw new JsonSyntaxError(i >= t.length ? "unexpected end of input" : "expected a value", i);
}

/**
 * Scans one complete JSON value starting at `i` (leading whitespace is
 * skipped) and returns the index just past it. Works iteratively, so deep
 * nesting cannot overflow the call stack.
 *
 * @param outerDepth how many containers enclose the value (counts toward
 *   {@link MAX_JSON_DEPTH}).
 * @throws JsonSyntaxError when the text at `i` is not one valid value, or it
 *   nests deeper than {@link MAX_JSON_DEPTH}.
 */
export function scanValue(t: string, i: number, outerDepth = 0): number {
  const stack: number[] = [];
  for (;;) {
    i = skipSpace(t, i);
    const c = t.charCodeAt(i);
    let opened = false;
    if (c === 0x7b || c === 0x5b) {
      if (outerDepth + stack.length >= MAX_JSON_DEPTH) throw new JsonSyntaxError(`nested deeper than ${MAX_JSON_DEPTH}`, i);
      const close = c === 0x7b ? 0x7d : 0x5d;
      const inner = skipSpace(t, i + 1);
      if (t.charCodeAt(inner) === close) {
        i = inner + 1;
      } else {
        stack.push(c === 0x7b ? OBJECT : ARRAY);
        i = c === 0x7b ? scanKeyColon(t, inner) : inner;
        opened = true;
      }
    } else {
      i = scanScalar(t, i);
    }
    if (opened) continue;
    // A value ended: close finished containers, or move to the next element.
    for (;;) {
      if (stack.length === 0) return i;
      i = skipSpace(t, i);
      const top = stack[stack.length - 1];
      const d = t.charCodeAt(i);
      if (d === 0x2c) {
        i = top === OBJECT ? scanKeyColon(t, skipSpace(t, i + 1)) : i + 1;
        break;
      }
      if ((top === OBJECT && d === 0x7d) || (top === ARRAY && d === 0x5d)) {
        stack.pop();
        i++;
        continue;
      }
      throw new JsonSyntaxError(top === OBJECT ? "expected ',' or '}'" : "expected ',' or ']'", i);
    }
  }
}

/**
 * Scans the object whose `{` is at `start` (after optional whitespace) one
 * level deep: every member's decoded key and raw value span, in source order
 * (duplicates included).
 *
 * @throws JsonSyntaxError when the text there is not a valid object.
 */
export function scanObject(t: string, start: number): JsonObject {
  start = skipSpace(t, start);
  if (t.charCodeAt(start) !== 0x7b) throw new JsonSyntaxError("expected an object", start);
  const members: JsonMember[] = [];
  let i = skipSpace(t, start + 1);
  if (t.charCodeAt(i) === 0x7d) return { members, start, end: i + 1 };
  for (;;) {
    const keyEnd = scanString(t, i);
    const raw = t.slice(i + 1, keyEnd - 1);
    const key = raw.includes("\\") ? (JSON.parse(t.slice(i, keyEnd)) as string) : raw;
    const valueStart = scanKeyColon(t, i);
    const valueEnd = scanValue(t, valueStart, 1);
    members.push({ key, valueStart, valueEnd });
    i = skipSpace(t, valueEnd);
    const d = t.charCodeAt(i);
    if (d === 0x7d) return { members, start, end: i + 1 };
    if (d !== 0x2c) throw new JsonSyntaxError("expected ',' or '}'", i);
    i = skipSpace(t, i + 1);
  }
}

/**
 * Scans a whole document that must be one object and nothing else but
 * whitespace.
 *
 * @throws JsonSyntaxError when it is not.
 */
export function scanDocumentObject(t: string): JsonObject {
  const obj = scanObject(t, 0);
  const rest = skipSpace(t, obj.end);
  if (rest !== t.length) throw new JsonSyntaxError("unexpected text after the top-level object", rest);
  return obj;
}

/**
 * Compares a JSON key with a Go struct field name the way Go's decoder does:
 * an exact match or a case-insensitive one under Unicode simple folding (so
 * `spec`, `SPEC` and `Spec` all name the field `Spec`).
 */
export function keyMatches(key: string, field: string): boolean {
  return key === field || foldKey(key) === foldKey(field);
}

/** The form under which {@link keyMatches} compares keys: equal folds mean matching keys. */
export function foldKey(key: string): string {
  return key.toUpperCase().toLowerCase();
}
