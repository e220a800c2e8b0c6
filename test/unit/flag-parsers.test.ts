import { describe, expect, test } from "vitest";
import { InvalidArgumentError } from "commander";
import { parseDuration, parseDurationOrZero, MAX_TIMER_MS } from "../../common/flag-parsers.js";

/**
 * Duration flags (common/flag-parsers.ts): what is not a duration with its
 * unit is a usage error (commander's InvalidArgumentError, exit 2), never a
 * crash or a silent reading. Found by a fresh-eyes run: `""` threw `ms`'s own
 * error (a stack trace, exit 1) and `5` was taken as 5 ms.
 */
describe("duration flags", () => {
  test.each([
    ["30s", 30_000],
    ["500ms", 500],
    ["2m", 120_000],
    ["1.5s", 1_500],
    ["5 m", 300_000],
  ])("%s is %d ms", (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
    expect(parseDurationOrZero(text)).toBe(ms);
  });

  test.each(["", " ", "5", "0.5", "-5s", "abc", "1x", "0x10", "s"])("%j is refused as a usage error naming the value", (text) => {
    for (const parse of [parseDuration, parseDurationOrZero]) {
      const err = (() => {
        try {
          parse(text);
          return undefined;
        } catch (e) {
          return e;
        }
      })();
      expect(err).toBeInstanceOf(InvalidArgumentError);
      expect((err as Error).message).toContain(`got ${JSON.stringify(text)}`);
      expect((err as Error).message).toContain("with its unit");
    }
  });

  test("zero is off where a flag allows it, in any unit, and said to be allowed when the value is refused", () => {
    for (const zero of ["0", "0s", "0ms", " 0 "]) expect(parseDurationOrZero(zero)).toBe(0);
    expect(() => parseDuration("0s")).toThrow(InvalidArgumentError);
    expect(() => parseDurationOrZero("-1s")).toThrow("expected 0 (off) or a positive duration");
  });

  test("a duration longer than a timer waits is refused by both", () => {
    expect(parseDuration("24d")).toBeLessThanOrEqual(MAX_TIMER_MS);
    expect(() => parseDuration("25d")).toThrow("expected at most 24d");
    expect(() => parseDurationOrZero("25d")).toThrow("expected at most 24d");
  });
});
