/**
 * A small strict JSON scanner that finds the members of an object and the
 * exact source span of each member's value, without building values. It works
 * on UTF-8 bytes; a string front end ({@link scanValue}, {@link scanObject},
 * {@link scanDocumentObject}) serves callers that hold text.
 *
 * - The schedule store uses it to keep a schedule's `Spec` object as the exact
 *   text the client sent (wire-contract.md section 5.4; docs/DESIGN.md principle 3)
 *   while reading and rewriting only the keys it owns.
 * - The session store uses the byte functions to project a `sessnap-json/1`
 *   payload (spec/session-metadata.md section 1; issue 12): it reads a handful
 *   of top-level members and skims the rest, `messages` included. In skim mode
 *   string contents are not checked: only quotes are looked for, four bytes
 *   at a time and with the native byte search over long runs, which is what
 *   keeps projecting a 16 MiB snapshot cheap; the structure (brackets,
 *   commas, colons, numbers, literals, string ends) is still checked. Pass a
 *   `Buffer` (a view of the bytes, no copy) for that speed: a plain
 *   `Uint8Array`'s `indexOf` is a much slower loop.
 *
 * The grammar is RFC 8259, as Go's `encoding/json` accepts it: no comments,
 * no trailing commas, no leading byte-order mark, control characters only as
 * escapes, numbers without leading zeros. Nesting deeper than
 * {@link MAX_JSON_DEPTH} is refused, as Go refuses it. Bytes of 0x80 and
 * above inside strings are passed over without UTF-8 validation (callers that
 * need valid UTF-8 check it first).
 */

/** Deepest nesting of arrays and objects accepted (the same bound Go's decoder uses). */
export const MAX_JSON_DEPTH = 10_000;

/**
 * The input is not JSON. `offset` is where scanning stopped: a byte offset
 * for the byte functions, a UTF-16 index for the string front end.
 */
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
  /** Index of the value's first byte (or character, for the string front end). */
  valueStart: number;
  /** Index just past the value's last byte (or character). */
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

/**
 * How string contents are read: `strict` checks every byte (control
 * characters and escapes, as Go's decoder does); `skim` only finds where the
 * string ends (a native search for the next unescaped quote).
 */
export type StringMode = "strict" | "skim";

/** What a walk visitor ({@link forEachMemberBytes}, {@link forEachElementBytes}) returns to end the walk early. */
export const STOP_WALK = -1;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/** The index of the first byte at or after `i` that is not JSON white space (space, tab, line feed, carriage return). */
function skipSpace(b: Uint8Array, i: number): number {
  for (;;) {
    const c = b[i]!;
    // One comparison for the usual case: no white space at all.
    if (c > 0x20 || (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d)) return i;
    i++;
  }
}

function isDigit(c: number | undefined): boolean {
  return c !== undefined && c >= 0x30 && c <= 0x39;
}

function isHex(c: number | undefined): boolean {
  return c !== undefined && (isDigit(c) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66));
}

/**
 * Flags the quote bytes of the 32-bit little-endian word `w`: bit 7 of each
 * byte of the result is set where that byte of `w` is a quote. With `x` zero
 * exactly where `w` holds a quote, `(x & 0x7f) + 0x7f` sets a byte's bit 7
 * unless its low seven bits are zero and or-ing `x` sets it unless bit 7 was
 * set too; no carry crosses a byte, so every flag is exact.
 */
function quoteFlags(w: number): number {
  const x = w ^ 0x22222222;
  return ~(((x & 0x7f7f7f7f) + 0x7f7f7f7f) | x | 0x7f7f7f7f);
}

/**
 * Four-byte words read in JavaScript before the search hands over to the
 * native byte search: one native call costs about as much as a dozen words,
 * and most gaps between quotes are short (tool-call arguments and code carry
 * an escaped quote every few bytes), while long ones (prose, base64) are worth
 * the call. Measured on the benchmark's payloads (bench/RESULTS.md).
 */
const NEAR_WORDS = 3;

/** The bytes being skimmed and a little-endian word view of them (see {@link wordView}). */
let viewedBytes: Uint8Array | undefined;
let viewedWords: DataView | undefined;

/**
 * A `DataView` over `b` to read four bytes at once, kept for the buffer last
 * skimmed: a skim asks for it once per string, and building one costs more
 * than a short string's whole search. The cache lives until the current job
 * ends (a microtask forgets it), so it never keeps a payload alive.
 */
function wordView(b: Uint8Array): DataView {
  if (b !== viewedBytes) {
    if (viewedBytes === undefined) queueMicrotask(() => (viewedBytes = viewedWords = undefined));
    viewedBytes = b;
    viewedWords = new DataView(b.buffer, b.byteOffset, b.byteLength);
  }
  return viewedWords!;
}

/** True when the quote at `q` is escaped: an odd run of backslashes precedes it. */
function escapedQuote(b: Uint8Array, q: number): boolean {
  if (b[q - 1] !== BACKSLASH) return false;
  let slashes = 1;
  while (b[q - 1 - slashes] === BACKSLASH) slashes++;
  return slashes % 2 === 1;
}

/**
 * The end of the string whose opening quote is at `i`: the next quote not
 * escaped. Only quotes are looked for, four bytes at a time, and the native
 * search takes over after {@link NEAR_WORDS} words without one; the
 * backslashes before a quote are counted only when the byte before it is one.
 */
function skimString(b: Uint8Array, i: number): number {
  const words = wordView(b);
  const lastWord = b.length - 4;
  let p = i + 1;
  let plainWords = 0;
  while (p <= lastWord) {
    let flags = quoteFlags(words.getInt32(p, true));
    if (flags === 0) {
      p += 4;
      if (++plainWords === NEAR_WORDS) {
        const q = b.indexOf(QUOTE, p);
        if (q < 0) throw new JsonSyntaxError("unterminated string", b.length);
        if (!escapedQuote(b, q)) return q + 1;
        p = q + 1;
        plainWords = 0;
      }
      continue;
    }
    // The flags lowest first are the quotes in byte order (little-endian: byte p is bits 0-7).
    do {
      const lowest = flags & -flags;
      const q = p + ((31 - Math.clz32(lowest)) >> 3);
      if (!escapedQuote(b, q)) return q + 1;
      flags ^= lowest;
    } while (flags !== 0);
    p += 4;
    plainWords = 0;
  }
  for (; p < b.length; p++) if (b[p] === QUOTE && !escapedQuote(b, p)) return p + 1;
  throw new JsonSyntaxError("unterminated string", b.length);
}

/** Checks a string literal byte by byte starting at its opening quote; returns the index after the closing quote. */
function strictString(b: Uint8Array, i: number): number {
  i++;
  for (;;) {
    if (i >= b.length) throw new JsonSyntaxError("unterminated string", i);
    const c = b[i]!;
    if (c === QUOTE) return i + 1;
    if (c < 0x20) throw new JsonSyntaxError("control character in string", i);
    if (c !== BACKSLASH) {
      i++;
      continue;
    }
    const e = b[i + 1];
    if (e === 0x75) {
      for (let k = 2; k < 6; k++) if (!isHex(b[i + k])) throw new JsonSyntaxError("bad \\u escape", i);
      i += 6;
    } else if (e === 0x22 || e === 0x5c || e === 0x2f || e === 0x62 || e === 0x66 || e === 0x6e || e === 0x72 || e === 0x74) {
      i += 2;
    } else {
      throw new JsonSyntaxError("bad escape", i);
    }
  }
}

function scanString(b: Uint8Array, i: number, mode: StringMode): number {
  if (b[i] !== QUOTE) throw new JsonSyntaxError("expected a string", i);
  return mode === "skim" ? skimString(b, i) : strictString(b, i);
}

function scanDigits(b: Uint8Array, i: number): number {
  if (!isDigit(b[i])) throw new JsonSyntaxError("expected a digit", i);
  while (isDigit(b[i])) i++;
  return i;
}

/** Scans a number literal; returns the index after it. */
function scanNumber(b: Uint8Array, i: number): number {
  if (b[i] === 0x2d) i++;
  if (b[i] === 0x30) i++;
  else i = scanDigits(b, i);
  if (b[i] === 0x2e) i = scanDigits(b, i + 1);
  const e = b[i];
  if (e === 0x65 || e === 0x45) {
    i++;
    const s = b[i];
    if (s === 0x2b || s === 0x2d) i++;
    i = scanDigits(b, i);
  }
  return i;
}

function scanLiteral(b: Uint8Array, i: number, word: string): number {
  for (let k = 0; k < word.length; k++) if (b[i + k] !== word.charCodeAt(k)) throw new JsonSyntaxError("expected a value", i);
  return i + word.length;
}

/** Scans the `:` after an object key that ends at `keyEnd`; returns the index of the value (white space skipped). */
function afterColon(b: Uint8Array, keyEnd: number): number {
  const i = skipSpace(b, keyEnd);
  if (b[i] !== 0x3a) throw new JsonSyntaxError("expected ':' after object key", i);
  return skipSpace(b, i + 1);
}

/** Scans `"key" :` starting at the quote; returns the index of the value (white space skipped). */
function scanKeyColon(b: Uint8Array, i: number, mode: StringMode): number {
  return afterColon(b, scanString(b, i, mode));
}

/** Scans one scalar (string, number, literal) at `i` (no leading space); returns the index after it. */
function scanScalar(b: Uint8Array, i: number, mode: StringMode): number {
  const c = b[i];
  if (c === QUOTE) return scanString(b, i, mode);
  if (c === 0x2d || isDigit(c)) return scanNumber(b, i);
  if (c === 0x74) return scanLiteral(b, i, "true");
  if (c === 0x66) return scanLiteral(b, i, "false");
  if (c === 0x6e) return scanLiteral(b, i, "null");
  throw new JsonSyntaxError(i >= b.length ? "unexpected end of input" : "expected a value", i);
}

/**
 * Scans one complete JSON value in `b` starting at byte `i` (leading
 * whitespace is skipped) and returns the offset just past it. Works
 * iteratively, so deep nesting cannot overflow the call stack.
 *
 * @param outerDepth how many containers enclose the value (counts toward
 *   {@link MAX_JSON_DEPTH}).
 * @param mode how string contents are read (see {@link StringMode}).
 * @throws JsonSyntaxError (byte offset) when the bytes at `i` are not one
 *   valid value, or it nests deeper than {@link MAX_JSON_DEPTH}.
 */
export function scanValueBytes(b: Uint8Array, i: number, outerDepth = 0, mode: StringMode = "strict"): number {
  i = skipSpace(b, i);
  if (b[i] !== 0x7b && b[i] !== 0x5b) return scanScalar(b, i, mode);
  // The closing byte of each open container, innermost last.
  const closers: number[] = [];
  for (;;) {
    const c = b[i];
    if (c === 0x7b || c === 0x5b) {
      if (outerDepth + closers.length >= MAX_JSON_DEPTH) throw new JsonSyntaxError(`nested deeper than ${MAX_JSON_DEPTH}`, i);
      const close = c + 2; // `{` 0x7b closes with `}` 0x7d, `[` 0x5b with `]` 0x5d
      i = skipSpace(b, i + 1);
      if (b[i] !== close) {
        closers.push(close);
        if (close === 0x7d) i = scanKeyColon(b, i, mode);
        continue;
      }
      i++;
    } else {
      i = scanScalar(b, i, mode);
    }
    // A value ended: close finished containers, or move to the next element.
    for (;;) {
      const depth = closers.length;
      if (depth === 0) return i;
      i = skipSpace(b, i);
      const close = closers[depth - 1]!;
      if (b[i] === 0x2c) {
        i = skipSpace(b, i + 1);
        if (close === 0x7d) i = scanKeyColon(b, i, mode);
        break;
      }
      if (b[i] !== close) throw new JsonSyntaxError(close === 0x7d ? "expected ',' or '}'" : "expected ',' or ']'", i);
      closers.pop();
      i++;
    }
  }
}

/** True when the key literal spanning [start, end) (quotes included) holds only ASCII and no escapes, so its bytes are its text. */
function plainKey(b: Uint8Array, start: number, end: number): boolean {
  for (let k = start + 1; k < end - 1; k++) {
    const c = b[k]!;
    if (c === BACKSLASH || c >= 0x80) return false;
  }
  return true;
}

/** Decodes the key literal spanning [start, end) (quotes included). */
export function decodeKeyBytes(b: Uint8Array, start: number, end: number): string {
  const buf = Buffer.from(b.buffer, b.byteOffset, b.byteLength);
  return plainKey(b, start, end) ? buf.toString("latin1", start + 1, end - 1) : (JSON.parse(buf.toString("utf8", start, end)) as string);
}

/** `c` with an ASCII capital letter lowered. */
function asciiLower(c: number): number {
  return c >= 0x41 && c <= 0x5a ? c | 0x20 : c;
}

/**
 * Which of the Go fields `fields` (ASCII names) the key literal spanning
 * [start, end) names (see {@link keyMatches}): the index of the first that
 * matches, or -1. A key of plain ASCII is compared on its bytes, letters
 * case-insensitively, which is all the folding does to ASCII; any other key
 * is decoded first, since an escape or a non-ASCII letter (U+212A folds to
 * `k`, U+017F to `s`) may still name a field.
 */
export function matchKeyBytes(b: Uint8Array, start: number, end: number, fields: readonly string[]): number {
  if (!plainKey(b, start, end)) {
    const key = decodeKeyBytes(b, start, end);
    return fields.findIndex((field) => keyMatches(key, field));
  }
  const length = end - start - 2;
  for (let f = 0; f < fields.length; f++) {
    const field = fields[f]!;
    if (field.length !== length) continue;
    let k = 0;
    while (k < length && asciiLower(b[start + 1 + k]!) === asciiLower(field.charCodeAt(k))) k++;
    if (k === length) return f;
  }
  return -1;
}

/**
 * Walks the members of the object whose `{` is at byte `start` (after
 * optional whitespace), in source order, without building keys. `visit` gets
 * the key literal's span (quotes included) and the value's first byte, and
 * returns the offset just past the value (scanning it as it likes, e.g. with
 * {@link scanValueBytes}), or {@link STOP_WALK} to end the walk. Keys are
 * always checked strictly.
 *
 * @returns the offset just past the closing `}`, or {@link STOP_WALK}.
 * @throws JsonSyntaxError (byte offset) when the bytes there are not a valid object.
 */
export function forEachMemberBytes(b: Uint8Array, start: number, visit: (keyStart: number, keyEnd: number, valueStart: number) => number): number {
  start = skipSpace(b, start);
  if (b[start] !== 0x7b) throw new JsonSyntaxError("expected an object", start);
  let i = skipSpace(b, start + 1);
  if (b[i] === 0x7d) return i + 1;
  for (;;) {
    const keyEnd = scanString(b, i, "strict");
    const valueEnd = visit(i, keyEnd, afterColon(b, keyEnd));
    if (valueEnd === STOP_WALK) return STOP_WALK;
    i = skipSpace(b, valueEnd);
    const d = b[i];
    if (d === 0x7d) return i + 1;
    if (d !== 0x2c) throw new JsonSyntaxError("expected ',' or '}'", i);
    i = skipSpace(b, i + 1);
  }
}

/**
 * Scans the object whose `{` is at byte `start` (after optional whitespace)
 * one level deep: every member's decoded key and raw value span (byte
 * offsets), in source order (duplicates included). Keys are always checked
 * strictly; `mode` applies to string contents inside values.
 *
 * @throws JsonSyntaxError (byte offset) when the bytes there are not a valid object.
 */
export function scanObjectBytes(b: Uint8Array, start: number, mode: StringMode = "strict"): JsonObject {
  const members: JsonMember[] = [];
  const open = skipSpace(b, start);
  const end = forEachMemberBytes(b, open, (keyStart, keyEnd, valueStart) => {
    const valueEnd = scanValueBytes(b, valueStart, 1, mode);
    members.push({ key: decodeKeyBytes(b, keyStart, keyEnd), valueStart, valueEnd });
    return valueEnd;
  });
  return { members, start: open, end };
}

/**
 * Scans bytes that must hold one object and nothing else but whitespace.
 *
 * @throws JsonSyntaxError (byte offset) when they do not.
 */
export function scanDocumentObjectBytes(b: Uint8Array, mode: StringMode = "strict"): JsonObject {
  const obj = scanObjectBytes(b, 0, mode);
  expectDocumentEnd(b, obj.end);
  return obj;
}

/**
 * Checks that nothing but whitespace follows the top-level value ending at byte `end`.
 *
 * @throws JsonSyntaxError (byte offset) at the first byte that is not whitespace.
 */
export function expectDocumentEnd(b: Uint8Array, end: number): void {
  const rest = skipSpace(b, end);
  if (rest !== b.length) throw new JsonSyntaxError("unexpected text after the top-level value", rest);
}

/**
 * Walks the elements of the array whose `[` is at byte `start` (after
 * optional whitespace), in order. `visit` gets each element's first byte and
 * returns the offset just past the element (scanning it as it likes, e.g.
 * with {@link scanObjectBytes} or {@link scanValueBytes}), or
 * {@link STOP_WALK} to end the walk. Nothing is built: the caller decides
 * what to read of each element.
 *
 * @returns the offset just past the closing `]`, or {@link STOP_WALK}.
 * @throws JsonSyntaxError (byte offset) when the bytes there are not a valid array.
 */
export function forEachElementBytes(b: Uint8Array, start: number, visit: (valueStart: number) => number): number {
  start = skipSpace(b, start);
  if (b[start] !== 0x5b) throw new JsonSyntaxError("expected an array", start);
  let i = skipSpace(b, start + 1);
  if (b[i] === 0x5d) return i + 1;
  for (;;) {
    const valueEnd = visit(skipSpace(b, i));
    if (valueEnd === STOP_WALK) return STOP_WALK;
    i = skipSpace(b, valueEnd);
    const d = b[i];
    if (d === 0x5d) return i + 1;
    if (d !== 0x2c) throw new JsonSyntaxError("expected ',' or ']'", i);
    i++;
  }
}

/**
 * Translates between UTF-16 indices of a string and byte offsets of its UTF-8
 * encoding (identity for ASCII text), for the string front end.
 */
class TextBytes {
  readonly bytes: Uint8Array;
  /** For each byte offset, the UTF-16 index of the character it belongs to; undefined for ASCII text. */
  private readonly charAt: Uint32Array | undefined;
  private readonly byteAt: Uint32Array | undefined;

  constructor(readonly text: string) {
    this.bytes = Buffer.from(text, "utf8");
    if (this.bytes.length === text.length) return;
    this.charAt = new Uint32Array(this.bytes.length + 1);
    this.byteAt = new Uint32Array(text.length + 1);
    let byte = 0;
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      const pair = c >= 0xd800 && c <= 0xdbff && i + 1 < text.length && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00;
      const width = c < 0x80 ? 1 : c < 0x800 ? 2 : pair ? 4 : 3;
      this.byteAt[i] = byte;
      if (pair) this.byteAt[i + 1] = byte + 2;
      for (let k = 0; k < width; k++) this.charAt[byte + k] = i;
      byte += width;
      if (pair) i++;
    }
    this.byteAt[text.length] = byte;
    this.charAt[byte] = text.length;
  }

  toByte(index: number): number {
    return this.byteAt === undefined ? index : this.byteAt[Math.min(index, this.text.length)]!;
  }

  toChar(offset: number): number {
    return this.charAt === undefined ? offset : this.charAt[Math.min(offset, this.bytes.length)]!;
  }

  /** Runs `scan` on the bytes, turning byte offsets in a syntax error into UTF-16 indices. */
  run<T>(scan: () => T): T {
    try {
      return scan();
    } catch (err) {
      if (err instanceof JsonSyntaxError) throw new JsonSyntaxError(err.problem, this.toChar(err.offset));
      throw err;
    }
  }

  object(obj: JsonObject): JsonObject {
    if (this.charAt === undefined) return obj;
    return {
      start: this.toChar(obj.start),
      end: this.toChar(obj.end),
      members: obj.members.map((m) => ({ key: m.key, valueStart: this.toChar(m.valueStart), valueEnd: this.toChar(m.valueEnd) })),
    };
  }
}

/**
 * {@link scanValueBytes} on text (strict): returns the UTF-16 index just past
 * the value starting at index `i`.
 *
 * @throws JsonSyntaxError (UTF-16 index) when the text there is not one valid value.
 */
export function scanValue(t: string, i: number, outerDepth = 0): number {
  const tb = new TextBytes(t);
  return tb.run(() => tb.toChar(scanValueBytes(tb.bytes, tb.toByte(i), outerDepth, "strict")));
}

/**
 * {@link scanObjectBytes} on text (strict), with spans as UTF-16 indices.
 *
 * @throws JsonSyntaxError (UTF-16 index) when the text there is not a valid object.
 */
export function scanObject(t: string, start: number): JsonObject {
  const tb = new TextBytes(t);
  return tb.run(() => tb.object(scanObjectBytes(tb.bytes, tb.toByte(start), "strict")));
}

/**
 * {@link scanDocumentObjectBytes} on text (strict), with spans as UTF-16 indices.
 *
 * @throws JsonSyntaxError (UTF-16 index) when the text is not one object.
 */
export function scanDocumentObject(t: string): JsonObject {
  const tb = new TextBytes(t);
  return tb.run(() => tb.object(scanDocumentObjectBytes(tb.bytes, "strict")));
}

/**
 * Compares a JSON key with a Go struct field name the way Go's decoder does:
 * an exact match or a case-insensitive one (so `spec`, `SPEC` and `Spec`
 * all name the field `Spec`); see {@link foldKey}. `field` must be ASCII, as
 * every field name of the harness's JSON documents is.
 */
export function keyMatches(key: string, field: string): boolean {
  return key === field || foldKey(key) === foldKey(field);
}

/** A code point outside ASCII. */
const NON_ASCII = /[^\u0000-\u007f]/;

/**
 * Non-ASCII code points that Go's `encoding/json` folds to an ASCII letter
 * when it matches a key to a field name: the long s (U+017F) to S and the
 * Kelvin sign (U+212A) to K. Go folds each code point on its own to the
 * least one of its simple case-folding orbit (`unicode.SimpleFold`: one code
 * point to one), and these are the only orbits that join a non-ASCII code
 * point to an ASCII letter; the dotless i (U+0131) and the dotted capital I
 * (U+0130) are orbits of their own there, so `"ıD"` names no field `ID`.
 */
const FOLDS_TO_ASCII: ReadonlyMap<string, string> = new Map([
  ["\u017f", "S"],
  ["\u212a", "K"],
]);

/**
 * The form under which {@link keyMatches} compares keys: equal folds mean
 * matching keys, for ASCII field names. ASCII letters are upper-cased, the
 * code points of {@link FOLDS_TO_ASCII} become their letter, and every other
 * code point is kept, so it never matches an ASCII field name. JavaScript's
 * own case mapping would not do: it maps one code point to several (`ß` to
 * `SS`, `ﬆ` to `ST`), so a key such as `"Seßion"` would name a field here
 * that Go leaves unset, and the driver and the harness would read one
 * stored document differently (found by a fresh-eyes run: a fire with a key
 * `"ﬆop"` was taken for a finished one).
 */
export function foldKey(key: string): string {
  // Nearly every key is ASCII, where upper-casing is the whole fold.
  if (!NON_ASCII.test(key)) return key.toUpperCase();
  let folded = "";
  for (const ch of key) {
    const code = ch.charCodeAt(0);
    if (code < 0x80) folded += code >= 0x61 && code <= 0x7a ? String.fromCharCode(code - 0x20) : ch;
    else folded += FOLDS_TO_ASCII.get(ch) ?? ch;
  }
  return folded;
}
