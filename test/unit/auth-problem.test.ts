import { afterAll, beforeAll, expect, test } from "vitest";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { TokenFile } from "../../services/server/auth.js";
import type { Logger } from "../../services/server/logger.js";

let dir: string;
let tokens: TokenFile;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "mecatl-auth-"));
  writeFileSync(join(dir, "tokens"), "tok-1\n");
  tokens = new TokenFile(join(dir, "tokens"), { info: () => undefined, warn: () => undefined } as unknown as Logger);
});
afterAll(() => {
  tokens?.close();
  rmSync(dir, { recursive: true, force: true });
});

test.each([
  ["no header", undefined, "missing authorization: Bearer <token> metadata"],
  ["another scheme", "Basic dG9rLTE6", "malformed authorization metadata: expected Bearer <token>, one token without spaces"],
  ["a bearer header without a token", "Bearer ", "malformed authorization metadata: expected Bearer <token>, one token without spaces"],
  ["two words after Bearer", "Bearer tok 1", "malformed authorization metadata: expected Bearer <token>, one token without spaces"],
  ["an unknown token", "Bearer tok-2", "unknown bearer token"],
  ["the token", "Bearer tok-1", undefined],
  ["the token, scheme in lower case", "bearer tok-1", undefined],
])("UNAUTHENTICATED's reason for %s says what is wrong (wire-contract section 6)", (_label, header, reason) => {
  expect(tokens.problem(header)).toBe(reason);
});

test("a token file line with a space inside its token is refused, naming the line (no header could carry it)", () => {
  writeFileSync(join(dir, "spaced"), "# tokens\ntok-1\ntok-a tok-b\n");
  expect(() => new TokenFile(join(dir, "spaced"), { info: () => undefined, warn: () => undefined } as unknown as Logger)).toThrow(`--auth-token-file ${join(dir, "spaced")} line 3 holds a space inside a token; put one token per line`);
});
