/**
 * The byte-level JSON scanner (services/json/json-scan.ts) against
 * `JSON.parse` as the reference, with generated documents (fast-check):
 * member and element spans in both string modes, the walkers, and the text
 * front end's UTF-16 spans.
 */
import { describe, expect, test } from "vitest";
import fc from "fast-check";
import {
  forEachElementBytes,
  forEachMemberBytes,
  JsonSyntaxError,
  matchKeyBytes,
  scanDocumentObject,
  scanDocumentObjectBytes,
  scanValueBytes,
  STOP_WALK,
  type StringMode,
} from "../../services/json/json-scan.js";

const bytes = (text: string) => Buffer.from(text, "utf8");
const spanValue = (b: Buffer, s: number, e: number) => JSON.parse(b.toString("utf8", s, e)) as unknown;

/** Strings rich in what a skimmer can trip on: quotes, backslash runs, controls, non-ASCII. */
const nasty = fc.string({ unit: fc.constantFrom("a", '"', "\\", "\\\\", "\n", "\u0000", "é", "🦀", "{", "]", ",", ":", " ") });
const value = fc.letrec((tie) => ({
  v: fc.oneof({ depthSize: "small" }, nasty, fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.boolean(), fc.constant(null), fc.array(tie("v"), { maxLength: 4 }), fc.dictionary(nasty, tie("v"), { maxKeys: 4 })),
})).v;
const document = fc.dictionary(nasty, value, { maxKeys: 6 });

/** A JSON value as `JSON.parse` gives it and one of its spellings (escapes and white space chosen at random). */
interface Spelled {
  value: unknown;
  text: string;
}

const uEscape = (c: string) => c.split("").map((unit) => `\\u${unit.charCodeAt(0).toString(16).padStart(4, "0")}`).join("");

/**
 * Pieces of a string: a text and how it is written inside the quotes. Rich in
 * what trips a skimmer: quotes and backslashes escaped every way JSON allows
 * (`\"`, `\u0022`, `\\`, `\u005c`, runs of escaped backslashes before an
 * escaped quote), brackets and separators, non-ASCII, and long runs without a
 * quote (so the search crosses word boundaries and hands over to the native
 * search).
 */
const piece = fc.oneof(
  fc.constantFrom('"', "\\", "/", "\b", "\f", "\n", "\r", "\t").map((c) => [c, JSON.stringify(c).slice(1, -1)] as const),
  fc.constantFrom('"', "\\", "/").map((c) => [c, `\\${c === "/" ? "/" : c}`] as const),
  fc.constantFrom("a", "{", "}", "[", "]", ",", ":", " ", "'", "é", "🦀", "\u2028", '"', "\\", "\n", "\u0000").map((c) => [c, uEscape(c)] as const),
  fc.constantFrom("a", "{", "]", ",", ":", " ", "é", "🦀", "\u007f").map((c) => [c, c] as const),
  fc.tuple(fc.integer({ min: 1, max: 7 }), fc.boolean()).map(([n, quote]) => ["\\".repeat(n) + (quote ? '"' : ""), "\\\\".repeat(n) + (quote ? '\\"' : "")] as const),
  fc.integer({ min: 8, max: 90 }).map((n) => ["x".repeat(n), "x".repeat(n)] as const),
);
const spelledString: fc.Arbitrary<Spelled> = fc.array(piece, { maxLength: 8 }).map((ps) => ({ value: ps.map(([v]) => v).join(""), text: `"${ps.map(([, t]) => t).join("")}"` }));
const space = fc.constantFrom("", "", "", " ", "\n", "\t", " \r\n  ");
const spelledNumber: fc.Arbitrary<Spelled> = fc
  .oneof(fc.integer().map(String), fc.double({ noNaN: true, noDefaultInfinity: true }).map((d) => JSON.stringify(d)), fc.constantFrom("0", "-0", "1E+2", "-0.5e-3", "10.25E1"))
  .map((text) => ({ value: Number(text), text }));
const spelledLiteral: fc.Arbitrary<Spelled> = fc.constantFrom<Spelled>({ value: true, text: "true" }, { value: false, text: "false" }, { value: null, text: "null" });
/** Container spellings with white space around every token. */
const spelled = fc.letrec<{ v: Spelled; members: Array<[Spelled, Spelled]> }>((tie) => ({
  v: fc.oneof(
    { depthSize: "small" },
    spelledString,
    spelledNumber,
    spelledLiteral,
    fc.tuple(fc.array(fc.tuple(space, tie("v"), space), { maxLength: 4 }), space).map(([items, pad]) => ({
      value: items.map(([, v]) => v.value),
      text: `[${items.map(([a, v, z]) => a + v.text + z).join(",") || pad}]`,
    })),
    tie("members").map((members) => {
      const value: Record<string, unknown> = {};
      for (const [k, v] of members) Object.defineProperty(value, k.value as string, { value: v.value, enumerable: true, writable: true, configurable: true });
      return { value, text: `{${members.map(([k, v]) => `${k.text} :${v.text}`).join(" ,")}}` };
    }),
  ),
  members: fc.array(fc.tuple(spelledString, tie("v")), { maxLength: 4 }),
})).members;

/** `body` in a larger buffer between junk bytes (quotes and backslashes included), as a view: the scanner must not look outside it. */
function embedded(body: Buffer, before: number[], after: number[]): Buffer {
  const backing = Buffer.concat([Buffer.from(before), body, Buffer.from(after)]);
  return backing.subarray(before.length, before.length + body.length);
}
const junk = fc.array(fc.constantFrom(0x22, 0x5c, 0x7d, 0x20, 0x61), { maxLength: 7 });

describe("byte-level JSON scanner", () => {
  test.each<StringMode>(["strict", "skim"])("finds the exact span of every member in hand-spelled JSON (%s strings)", (mode) => {
    fc.assert(
      fc.property(spelled, space, junk, junk, (members, pad, before, after) => {
        const text = `${pad}{${pad}${members.map(([k, v]) => `${k.text}${pad}:${pad}${v.text}`).join(`${pad},${pad}`)}${pad}}${pad}`;
        const b = embedded(Buffer.from(text), before, after);
        JSON.parse(text); // the generator spells valid JSON
        const obj = scanDocumentObjectBytes(b, mode);
        expect(obj.members.map((m) => m.key)).toEqual(members.map(([k]) => k.value));
        obj.members.forEach((m, k) => {
          expect(b.toString("utf8", m.valueStart, m.valueEnd)).toBe(members[k]![1].text);
          expect(spanValue(b, m.valueStart, m.valueEnd)).toEqual(members[k]![1].value);
        });
      }),
      { numRuns: 300 },
    );
  });

  test("refuses broken JSON exactly when JSON.parse does, in both modes", () => {
    // Compact documents, cut at every bracket, comma and colon (inside strings too), with control characters
    // escaped: whatever a mutation turns into string content is valid there, so skim and strict must agree with
    // JSON.parse. (No backslash is inserted: inside a string it could make an escape only strict mode refuses.)
    const tokenized = spelled.map((members) => [
      "{",
      ...members.flatMap(([k, v], i) => [...(i > 0 ? [","] : []), k.text, ":", ...JSON.stringify(JSON.parse(v.text)).split(/(?<=[[\]{},:])|(?=[[\]{},:])/)]),
      "}",
    ]);
    const mutation = fc.oneof(
      fc.record({ op: fc.constant("delete" as const), at: fc.nat() }),
      fc.record({ op: fc.constant("repeat" as const), at: fc.nat() }),
      fc.record({ op: fc.constant("insert" as const), at: fc.nat(), token: fc.constantFrom("{", "}", "[", "]", ",", ":", '"', " ", "1", "-", "tru", "nul", "0", "1.", "e5") }),
      fc.record({ op: fc.constant("truncate" as const), at: fc.nat() }),
    );
    fc.assert(
      fc.property(tokenized, mutation, junk, junk, (tokens, m, before, after) => {
        const t = [...tokens];
        const at = m.at % (t.length + 1);
        if (m.op === "delete") t.splice(at, 1);
        else if (m.op === "repeat") t.splice(at, 0, t[at] ?? "}");
        else if (m.op === "insert") t.splice(at, 0, m.token);
        let text = t.join("");
        if (m.op === "truncate") text = Buffer.from(text).subarray(0, m.at % Math.max(1, Buffer.byteLength(text))).toString("latin1");
        const bytes = m.op === "truncate" ? Buffer.from(text, "latin1") : Buffer.from(text, "utf8");
        let valid: boolean;
        try {
          const v = JSON.parse(bytes.toString("utf8")) as unknown;
          valid = v !== null && typeof v === "object" && !Array.isArray(v);
        } catch {
          valid = false;
        }
        const b = embedded(bytes, before, after);
        for (const mode of ["strict", "skim"] as const) {
          let scanned = true;
          try {
            scanDocumentObjectBytes(b, mode);
          } catch (err) {
            expect(err).toBeInstanceOf(JsonSyntaxError);
            scanned = false;
          }
          expect(scanned, `${mode}: ${bytes.toString("utf8")}`).toBe(valid);
        }
      }),
      { numRuns: 500 },
    );
  });


  test.each<StringMode>(["strict", "skim"])("finds every member and its exact value span (%s strings), compact or indented", (mode) => {
    fc.assert(
      fc.property(document, fc.boolean(), (doc, indented) => {
        const b = bytes(JSON.stringify(doc, null, indented ? 2 : undefined));
        const want = JSON.parse(b.toString()) as Record<string, unknown>;
        const obj = scanDocumentObjectBytes(b, mode);
        expect(obj.members.map((m) => m.key)).toEqual(Object.keys(doc));
        for (const m of obj.members) expect(spanValue(b, m.valueStart, m.valueEnd)).toEqual(want[m.key]);
        expect([obj.start, obj.end]).toEqual([0, b.length]);
      }),
    );
  });

  test("the walkers visit members and elements in order and stop when told", () => {
    fc.assert(
      fc.property(fc.array(value, { maxLength: 8 }), fc.nat(8), (items, stopAt) => {
        const b = bytes(JSON.stringify({ items }));
        const seen: unknown[] = [];
        forEachMemberBytes(b, 0, (_ks, _ke, valueStart) =>
          forEachElementBytes(b, valueStart, (at) => {
            if (seen.length === stopAt) return STOP_WALK;
            const end = scanValueBytes(b, at, 2, "skim");
            seen.push(spanValue(b, at, end));
            return end;
          }) === STOP_WALK
            ? STOP_WALK
            : scanValueBytes(b, valueStart, 1, "skim"),
        );
        expect(seen).toEqual((JSON.parse(JSON.stringify(items)) as unknown[]).slice(0, stopAt));
      }),
    );
  });

  test("the text front end reports UTF-16 spans, also after non-ASCII text", () => {
    fc.assert(
      fc.property(document, (doc) => {
        const text = JSON.stringify(doc);
        const want = JSON.parse(text) as Record<string, unknown>;
        for (const m of scanDocumentObject(text).members) expect(JSON.parse(text.slice(m.valueStart, m.valueEnd))).toEqual(want[m.key]);
      }),
    );
    const err = (() => {
      try {
        scanDocumentObject('{"é🦀":tru}');
      } catch (e) {
        return e as JsonSyntaxError;
      }
    })();
    expect(err?.offset).toBe(7);
  });

  test("skim mode still refuses broken structure; only strict mode checks string contents", () => {
    for (const bad of ['{"a":[1,2}', '{"a":"x}', '{"a":1,}', '{"a" 1}', '{"a":"\\"}', "[]"]) {
      expect(() => scanDocumentObjectBytes(bytes(bad), "skim"), bad).toThrow(JsonSyntaxError);
    }
    const control = bytes('{"a":"tab\there"}');
    expect(() => scanDocumentObjectBytes(control, "strict")).toThrow(JsonSyntaxError);
    expect(scanDocumentObjectBytes(control, "skim").members.map((m) => m.key)).toEqual(["a"]);
  });

  test("keys match Go field names on the bytes, case-insensitively, with Unicode folding where it matters", () => {
    const match = (key: string, ...fields: string[]) => {
      const b = bytes(JSON.stringify(key));
      return matchKeyBytes(b, 0, b.length, fields);
    };
    expect([match("role", "role"), match("ROLE", "role"), match("Rolé", "role"), match("rol", "role")]).toEqual([0, 0, -1, -1]);
    expect([match("\u017Fubject", "Subject"), match("\u212Aind", "Kind"), match("te\\u0078t", "text")]).toEqual([0, 0, -1]);
    const escaped = bytes('"te\\u0078t"');
    expect(matchKeyBytes(escaped, 0, escaped.length, ["role", "text"])).toBe(1);
    // Only letters fold: `_` is not DEL, `@` is not a backquote.
    expect([match("tool\u007fcalls", "tool_calls"), match("`x", "@x"), match("TEXT", "role", "text"), match("texts", "role", "text")]).toEqual([-1, -1, 1, -1]);
  });
});
