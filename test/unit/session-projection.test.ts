/**
 * The sessnap projection's derivations (spec/session-metadata.md sections 1.5,
 * 1.9 and 3.1) against the spec's vectors and, for activity, against a
 * reference that decodes the whole payload with `JSON.parse`, on generated
 * conversations whose JSON escapes characters the way any encoder may.
 */
import { describe, expect, test } from "vitest";
import fc from "fast-check";
import { goUnixNano, isValidIncarnation, legacyIncarnation } from "../../common/incarnation.js";
import { principalScopeHash } from "../../common/principal-scope.js";
import { ZERO_TIME_NANOS } from "../../services/json/rfc3339.js";
import { isGenuinePrompt } from "../../services/session-store/activity.js";
import { leadingId, projectSnapshot, SnapshotPayloadError } from "../../services/session-store/projection.js";

const NUDGE = "Please continue. Make concrete progress on the task using your tools, or \u2014 if you are blocked or believe the task is complete \u2014 say so explicitly in a short message.";

/** JSON text of `v` with some characters of every string written as `\uXXXX` escapes (any valid encoder may do that). */
function escapedJson(v: unknown, escapeEvery: number): string {
  if (typeof v === "string") {
    let out = '"';
    for (const [i, ch] of [...v].entries()) {
      const code = ch.codePointAt(0)!;
      if (code < 0x10000 && (i % escapeEvery === 0 || ch === '"' || ch === "\\" || code < 0x20)) out += `\\u${code.toString(16).padStart(4, "0")}`;
      else out += ch;
    }
    return `${out}"`;
  }
  if (Array.isArray(v)) return `[${v.map((x) => escapedJson(x, escapeEvery)).join(",")}]`;
  if (v !== null && typeof v === "object") return `{${Object.entries(v).filter(([, x]) => x !== undefined).map(([k, x]) => `${escapedJson(k, escapeEvery)}:${escapedJson(x, escapeEvery)}`).join(",")}}`;
  return JSON.stringify(v);
}

const text = fc.oneof(
  fc.string(),
  fc.constantFrom("", "[conversation compacted] so far", "[earlier turns summarised]\nx", NUDGE, "[harness note: 1 background command(s) finished: a]", "[harness note: x]", "go \\ on"),
  fc.tuple(fc.constantFrom("[conversation compacted]", "[harness note: 2 background subagent(s) still running: ", ""), fc.string()).map(([a, b]) => a + b),
);
const message = fc.record({ role: fc.constantFrom("user", "assistant", "tool", "User"), text: fc.option(text, { nil: undefined }), extra: fc.string() }, { requiredKeys: ["role"] });

describe("sessnap projection", () => {
  test("activity derived on the bytes equals the predicate over fully decoded messages (1.9)", () => {
    fc.assert(
      fc.property(fc.array(message, { maxLength: 6 }), fc.integer({ min: 1, max: 5 }), (messages, escapeEvery) => {
        const doc = { id: "s", messages, kind: "main" };
        const payload = Buffer.from(escapedJson(doc, escapeEvery));
        const want = messages.some((m) => m.role === "user" && isGenuinePrompt(m.text ?? "")) ? "active" : "draft";
        expect(projectSnapshot("s", payload, "").activityState).toBe(want);
        expect(projectSnapshot("s", payload, "draft").activityState).toBe("draft");
      }),
    );
  });

  test("activity derived on the bytes equals the predicate when keys repeat, change case and sit among nested values (1.9)", () => {
    // Go matches keys case-insensitively and the last occurrence wins; values the walk skips hold nasty strings.
    const nasty = fc.string({ unit: fc.constantFrom("a", '"', "\\", "\\\\", "\n", "{", "]", ",", ":", "é", "🦀", "user") });
    const nested = fc.letrec((tie) => ({ v: fc.oneof({ depthSize: "small" }, nasty, fc.integer(), fc.constant(null), fc.array(tie("v"), { maxLength: 3 }), fc.dictionary(nasty, tie("v"), { maxKeys: 3 })) })).v;
    const member = fc.oneof(
      fc.tuple(fc.constantFrom("role", "Role", "ROLE"), fc.constantFrom("user", "assistant", "tool")),
      fc.tuple(fc.constantFrom("text", "Text", "TEXT"), text),
      fc.tuple(fc.constantFrom("extra", "tool_calls", "parts", "texts", "rol"), nested),
    );
    const messageMembers = fc.array(member, { maxLength: 6 });
    fc.assert(
      fc.property(fc.array(messageMembers, { maxLength: 6 }), fc.integer({ min: 1, max: 5 }), fc.boolean(), (messages, escapeEvery, plainKeys) => {
        const spell = (v: unknown) => escapedJson(v, escapeEvery);
        const spellKey = (k: string) => (plainKeys ? JSON.stringify(k) : spell(k));
        const payload = Buffer.from(`{"id":"s","messages":[${messages.map((ms) => `{${ms.map(([k, v]) => `${spellKey(k)}:${spell(v)}`).join(",")}}`).join(",")}],"kind":"main"}`);
        const genuine = messages.some((ms) => {
          const last = (name: string) => ms.filter(([k]) => k.toLowerCase() === name).at(-1)?.[1];
          return last("role") === "user" && isGenuinePrompt((last("text") as string | undefined) ?? "");
        });
        expect(projectSnapshot("s", payload, "").activityState).toBe(genuine ? "active" : "draft");
      }),
    );
  });

  test("the legacy incarnation, principal scope and Go's UnixNano wrap match the spec's vectors (1.5, 3.1)", () => {
    expect(legacyIncarnation("s1", 1_000_000_000n, principalScopeHash(undefined))).toBe("legacy_99a5b3dfa805c1922f429916ef3b62ec6d2cca00a49c23c8b0f714eadc70365a");
    expect(principalScopeHash({ issuer: "https://issuer.example", subject: "alice" }).toString("hex")).toBe("d0c1e6aaa26b1226a7b0a1a3e4c6800ddbed666f783b7b7ea091754bb1502198");
    expect(principalScopeHash(undefined).toString("hex")).toBe("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    expect(principalScopeHash({ issuer: "a\u0000", subject: "b" }).toString("hex")).toBe("b6d985c0caf0899f64de96b20f061830ae946c5b321700bf191502f03929e0ce");
    expect(goUnixNano(ZERO_TIME_NANOS)).toBe(-6_795_364_578_871_345_152n);
    const zero = projectSnapshot("z", Buffer.from('{"id":"z"}'), "");
    expect(zero.metadata?.incarnation).toBe(legacyIncarnation("z", ZERO_TIME_NANOS, principalScopeHash(undefined)));
    expect([zero.metadata?.createdAtNanos, zero.metadata?.kind, zero.activityState]).toEqual([undefined, "unknown", "draft"]);
  });

  test("incarnation ids: minted base32 with zero trailing bits, or legacy hex (1.5)", () => {
    expect(["inc_aaaqeayeaudaocajbifqydiob4", `legacy_${"A".repeat(64)}`].map(isValidIncarnation)).toEqual([true, true]);
    expect(["", "inc_aaaqeayeaudaocajbifqydiob5", "inc_aaaqeayeaudaocajbifqydio4", `legacy_${"0".repeat(63)}`, "inc_AAAQEAYEAUDAOCAJBIFQYDIOB4"].map(isValidIncarnation)).toEqual([false, false, false, false, false]);
  });

  test("a payload that is not an object with an id is opaque; a wrong id is refused naming both ids", () => {
    for (const p of ["not json", "[1]", '{"no":"id"}', '{"id":"s"} trailing']) expect(projectSnapshot("s", Buffer.from(p), "").metadata, p).toBeUndefined();
    expect(() => projectSnapshot("s", Buffer.from('{"id":"t"}'), "")).toThrow(SnapshotPayloadError);
    expect(() => projectSnapshot("s", Buffer.from('{"id":"t"}'), "")).toThrow(/"t".*"s"/);
  });

  test("leadingId reads the id only when it is the first member and a string; the projection's id can still differ (a later member wins)", () => {
    const cases: Array<[string, string | undefined]> = [
      ['{"id":"s","messages":[]}', "s"],
      [' \n{ "ID" : "s\u0041" , "x": 1}', "sA"],
      ['{"Id":"s"', "s"],
      ['{"state":"idle","id":"s"}', undefined],
      ['{"id":7}', undefined],
      ['{"id":null,"id":"s"}', undefined],
      ['{"id":"unterminated', undefined],
      ["[]", undefined],
      ["not json", undefined],
      ["{}", undefined],
    ];
    for (const [payload, want] of cases) expect(leadingId(Buffer.from(payload)), payload).toBe(want);
    const overridden = Buffer.from('{"id":"t","ID":"s"}');
    expect(leadingId(overridden)).toBe("t");
    expect(projectSnapshot("s", overridden, "").metadata?.incarnation).toMatch(/^legacy_/);
  });

  test("repeated keys are assigned as Go's decoder assigns them: a struct's occurrences merge, null resets only pointers, slices and maps", () => {
    const base = '"id":"s","created_at":"2024-01-01T00:00:00Z","environment_ref":{"Kind":"local"},"environment_ref":{"ID":"/ws2","Revision":"r"}';
    const got = projectSnapshot("s", Buffer.from(`{${base},"title":"T","title":null,"relationship":{"team_id":"t"},"RELATIONSHIP":{"member_name":"m","branch_index":2},"relationship":{"branch_index":null},"counters":{"Turns":3},"counters":{"ToolCalls":1},"owner":{"Issuer":"i","Subject":"x"},"owner":{"Name":"n"}}`), "").metadata!;
    // Go merges the two environment_ref objects, keeps "T" (null is a no-op on a string), merges relationship and
    // resets only its pointer branch_index, merges counters (Turns stays 3) and the owner pointer's struct.
    expect(got.environmentRef).toEqual({ kind: "local", id: "/ws2", revision: "r" });
    expect(got.title).toBe("T");
    expect(got.relationship).toMatchObject({ teamId: "t", memberName: "m", branchIndex: undefined });
    expect(got.turns).toBe(3);
    expect(got.owner).toEqual({ issuer: "i", subject: "x", grantType: "", name: "n" });
    const ownerless = projectSnapshot("s", Buffer.from(`{${base},"owner":{"Issuer":"i","Subject":"x"},"owner":null}`), "").metadata!;
    expect(ownerless.owner).toBeUndefined();
    expect(() => projectSnapshot("s", Buffer.from(`{${base},"relationship":{"team_id":"t"},"relationship":"x"}`), "")).toThrow(/relationship must be an object/);
  });
});
