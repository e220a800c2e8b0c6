import { expect, test } from "vitest";
import { decodeCursor, encodeCursor } from "../../services/event-log/cursor.js";

const GEN = "0123456789abcdef";
const b64 = (text: string) => Buffer.from(text, "utf8").toString("base64url");

test("an issued cursor decodes to its generation and position", () => {
  expect(decodeCursor(encodeCursor("s", GEN, 7), "s")).toEqual({ generation: GEN, position: 7 });
});

test.each([
  ["a repeated field", `{"v":"cur/1","s":"s","g":"${GEN}","p":"9","p":"1"}`, "cursor: a field appears more than once"],
  ["a number where a string belongs", `{"v":"cur/1","s":"s","g":"${GEN}","p":1}`, "cursor: every field must be a string"],
  ["a __proto__ field", `{"v":"cur/1","s":"s","g":"${GEN}","p":"1","__proto__":{}}`, "cursor: unexpected or missing fields"],
  ["a byte order mark before the JSON", `\ufeff{"v":"cur/1","s":"s","g":"${GEN}","p":"1"}`, "cursor: not a JSON envelope"],
])("%s is cursor_malformed, saying what is wrong (wire-contract sections 3.6 and 3.8)", (_label, json, message) => {
  expect(() => decodeCursor(b64(json), "s")).toThrow(expect.objectContaining({ reason: "cursor_malformed", message }));
});
