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
  keyBytesMatch,
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

describe("byte-level JSON scanner", () => {
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
    const match = (key: string, field: string) => {
      const b = bytes(JSON.stringify(key));
      return keyBytesMatch(b, 0, b.length, field);
    };
    expect([match("role", "role"), match("ROLE", "role"), match("Rolé", "role"), match("rol", "role")]).toEqual([true, true, false, false]);
    expect([match("\u017Fubject", "Subject"), match("\u212Aind", "Kind"), match("te\\u0078t", "text")]).toEqual([true, true, false]);
    const escaped = bytes('"te\\u0078t"');
    expect(keyBytesMatch(escaped, 0, escaped.length, "text")).toBe(true);
  });
});
