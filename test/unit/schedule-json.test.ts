import { describe, expect, test } from "vitest";
import { JsonSyntaxError, keyMatches, MAX_JSON_DEPTH, scanDocumentObject, scanValue } from "../../services/json/json-scan.js";
import { formatRfc3339, MAX_TIME_NANOS, MIN_TIME_NANOS, parseRfc3339, TimeFormatError, ZERO_TIME_NANOS } from "../../services/json/rfc3339.js";
import { encodeSchedule, parseFire, parseSchedule, payloadText, ScheduleJsonError, withFireProgress, zeroState } from "../../services/schedule-store/schedule.js";

const S = 1_000_000_000n;
const T0 = 1_700_000_000n * S;

describe("RFC 3339 times (wire-contract.md 5.4)", () => {
  test.each([
    ["2023-11-14T22:13:20Z", T0],
    ["2023-11-15T00:13:20+02:00", T0],
    ["2023-11-14T16:43:20-05:30", T0],
    ["2023-11-14T22:13:20.5Z", T0 + 500_000_000n],
    ["2023-11-14T22:13:20.000000001Z", T0 + 1n],
    ["2023-11-15T00:13:20.123456789+02:00", T0 + 123_456_789n],
    ["1970-01-01T00:00:00Z", 0n],
    ["1969-12-31T23:59:59.999999999Z", -1n],
    ["0001-01-01T00:00:00Z", ZERO_TIME_NANOS],
    ["2024-02-29T00:00:00Z", 1_709_164_800n * S],
    ["0000-01-01T00:00:00Z", MIN_TIME_NANOS],
    ["9999-12-31T23:59:59.999999999Z", MAX_TIME_NANOS],
  ])("%s is %s ns", (text, nanos) => {
    expect(parseRfc3339(text)).toBe(nanos);
  });

  test.each([
    "2023-11-14 22:13:20Z",
    "2023-11-14t22:13:20z",
    "2023-11-14T22:13:20",
    "2023-11-14T22:13:20.Z",
    "2023-11-14T22:13:20.1234567891Z",
    "2023-02-29T00:00:00Z",
    "2023-13-01T00:00:00Z",
    "2023-11-14T24:00:00Z",
    "2023-11-14T23:59:60Z",
    "2023-11-14T22:13:20+24:00",
    "0000-01-01T00:00:00+00:01",
    "+2023-11-14T22:13:20Z",
    "２023-11-14T22:13:20Z",
  ])("%s is refused", (text) => {
    expect(() => parseRfc3339(text)).toThrow(TimeFormatError);
  });

  test("formatting is UTC, trims trailing fraction zeros, and round-trips", () => {
    expect(formatRfc3339(T0)).toBe("2023-11-14T22:13:20Z");
    expect(formatRfc3339(T0 + 120_000_000n)).toBe("2023-11-14T22:13:20.12Z");
    expect(formatRfc3339(T0 + 1n)).toBe("2023-11-14T22:13:20.000000001Z");
    expect(formatRfc3339(-1n)).toBe("1969-12-31T23:59:59.999999999Z");
    expect(formatRfc3339(ZERO_TIME_NANOS)).toBe("0001-01-01T00:00:00Z");
    for (let n = MIN_TIME_NANOS; n < MAX_TIME_NANOS; n += 9_876_543_210_987_654_321n) expect(parseRfc3339(formatRfc3339(n))).toBe(n);
    expect(() => formatRfc3339(MAX_TIME_NANOS + 1n)).toThrow(RangeError);
  });
});

describe("JSON scanner", () => {
  test("finds members and exact value spans, duplicates included", () => {
    const t = ` { "a" : [1, {"x":null}] ,"b":"\\u00e9}","a":-0.5e+3 } `;
    const obj = scanDocumentObject(t);
    expect(obj.members.map((m) => [m.key, t.slice(m.valueStart, m.valueEnd)])).toEqual([
      ["a", `[1, {"x":null}]`],
      ["b", `"\\u00e9}"`],
      ["a", "-0.5e+3"],
    ]);
  });

  test.each([
    "",
    "{",
    "{}x",
    `{"a":1,}`,
    `{"a" 1}`,
    `{'a':1}`,
    `{"a":01}`,
    `{"a":1.}`,
    `{"a":.5}`,
    `{"a":+1}`,
    `{"a":tru}`,
    `{"a":"\t"}`,
    `{"a":"\\x"}`,
    `{"a":[1,]}`,
    `{"a":NaN}`,
    "\ufeff{}",
    "[]",
  ])("refuses %j", (t) => {
    expect(() => scanDocumentObject(t)).toThrow(JsonSyntaxError);
  });

  test("nesting is bounded without recursion", () => {
    const deep = (n: number) => "[".repeat(n) + "]".repeat(n);
    expect(scanValue(deep(MAX_JSON_DEPTH), 0)).toBe(2 * MAX_JSON_DEPTH);
    expect(() => scanValue(deep(MAX_JSON_DEPTH + 1), 0)).toThrow(JsonSyntaxError);
  });

  test("keys match Go fields case-insensitively, with Unicode simple folding", () => {
    expect(keyMatches("Spec", "Spec")).toBe(true);
    expect(keyMatches("SPEC", "Spec")).toBe(true);
    expect(keyMatches("\u017Fpec", "Spec")).toBe(true);
    expect(keyMatches("\u212Aind", "Kind")).toBe(true);
    expect(keyMatches("SessionId", "SessionID")).toBe(true);
    expect(keyMatches("Specs", "Spec")).toBe(false);
  });

  test("keys that only a full (one-to-many) case mapping would fold do not match, as in Go", () => {
    // JavaScript upper-cases ß to SS and the ligatures to ST or FF; Go folds code point by code point.
    expect(keyMatches("LastFireSe\u00DFionID", "LastFireSessionID")).toBe(false);
    expect(keyMatches("\uFB06op", "Stop")).toBe(false);
    expect(keyMatches("\uFB05op", "Stop")).toBe(false);
    expect(keyMatches("\u0130D", "ID")).toBe(false);
    expect(keyMatches("\u0131D", "ID")).toBe(false);
    expect(keyMatches("Sess\u0131onID", "SessionID")).toBe(false);
    expect(keyMatches("\u0130d", "ID")).toBe(false);
  });
});

describe("schedule documents", () => {
  test("the Spec text is kept exactly, including keys and numbers JSON.parse would change", () => {
    const spec = `{"FireTimeout":9007199254740993, "Name":"a","Big":1e400,"Dup":1,"Dup":2,"Name":"b"}`;
    const doc = parseSchedule(`{"Spec":${spec},"Extra":true}`);
    expect(doc.specText).toBe(spec);
    expect(doc.name).toBe("b");
    expect(encodeSchedule(doc.specText, doc.state)).toContain(`{"Spec":${spec},"State":{`);
  });

  test("State is decoded by Go's rules and re-encoded in Go's key order", () => {
    const doc = parseSchedule(`{"Spec":{"Name":"n","MaxFires":-3},"State":{"nextfireat":"2023-11-15T00:13:20+02:00","FireCount":2,"FireCount":null,"Enabled":true,"Unknown":{}}}`);
    expect(doc.maxFires).toBe(-3n);
    expect(doc.state).toEqual({ ...zeroState(), nextFireAt: T0, fireCount: 2n, enabled: true });
    expect(encodeSchedule("{}", doc.state)).toBe(
      `{"Spec":{},"State":{"NextFireAt":"2023-11-14T22:13:20Z","LastFireAt":"0001-01-01T00:00:00Z","FireCount":2,"Enabled":true,"DeletionID":"","LastFireSessionID":"","OneShotRetryCount":0,"LastFireStartedAt":"0001-01-01T00:00:00Z","LastFireProgressAt":"0001-01-01T00:00:00Z","FireDeadline":"0001-01-01T00:00:00Z"}}`,
    );
  });

  test.each([
    [`{"State":{}}`, "Spec"],
    [`{"Spec":null}`, "Spec"],
    [`{"Spec":{},"SPEC":{}}`, "Spec"],
    [`{"Spec":{"PlacementOwned":1}}`, "Spec.PlacementOwned"],
    [`{"Spec":{"MaxFires":1e2}}`, "Spec.MaxFires"],
    [`{"Spec":{},"State":"x"}`, "State"],
    [`{"Spec":{},"State":{"LastFireAt":5}}`, "State.LastFireAt"],
    [`{"Spec":{},"State":{"OneShotRetryCount":-9223372036854775809}}`, "State.OneShotRetryCount"],
  ])("%s is refused naming %s", (text, path) => {
    let caught: unknown;
    try {
      parseSchedule(text);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ScheduleJsonError);
    expect((caught as ScheduleJsonError).path).toBe(path);
  });

  test("payload text must be valid UTF-8", () => {
    expect(payloadText(new Uint8Array([0x7b, 0x7d]))).toBe("{}");
    expect(() => payloadText(new Uint8Array([0x7b, 0xc3, 0x7d]))).toThrow(ScheduleJsonError);
  });
});

describe("fire documents", () => {
  test("parses the fields the rules read", () => {
    const f = parseFire(`{"ID":"f","ScheduleName":"s","SessionID":"x","StartedAt":"2023-11-14T22:13:20Z","Stop":"end_turn","More":[1]}`);
    expect(f).toMatchObject({ id: "f", scheduleName: "s", sessionId: "x", startedAt: T0, progressAt: ZERO_TIME_NANOS, stop: "end_turn" });
  });

  test("progress replaces only the value Go would read, or appends the key", () => {
    const dup = parseFire(`{"ID":"f", "ProgressAt":"2023-11-14T22:13:20Z" ,"progressat":null}`);
    expect(withFireProgress(dup, T0 + 1n).text).toBe(`{"ID":"f", "ProgressAt":"2023-11-14T22:13:20Z" ,"progressat":"2023-11-14T22:13:20.000000001Z"}`);
    const none = parseFire(`{ "ID":"f" }`);
    expect(withFireProgress(none, T0).text).toBe(`{ "ID":"f","ProgressAt":"2023-11-14T22:13:20Z" }`);
    const empty = parseFire(`{}`);
    const out = withFireProgress(empty, T0);
    expect(out.text).toBe(`{"ProgressAt":"2023-11-14T22:13:20Z"}`);
    expect(parseFire(out.text).progressAt).toBe(T0);
  });
});
