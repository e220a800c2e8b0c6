import { isUtf8 } from "node:buffer";
import type { DescMessage } from "@bufbuild/protobuf";
import { invalidArgument } from "./errors.js";

/** What a lenient decoder puts where the bytes were not UTF-8. */
const REPLACEMENT = "\ufffd";

/**
 * Refuses a JSON request text that is not UTF-8 (RFC 8259 section 8.1;
 * wire-contract.md section 1: strings are valid UTF-8). connect-es decodes
 * JSON leniently, each bad byte becoming U+FFFD, so `{"sessionId":"a\xff"}`
 * and `{"sessionId":"a\xfe"}` would both be stored as session `a\ufffd`. The
 * field is named as the gRPC listener names it (proto field names, nested
 * with dots): the first string, key or value, holding a U+FFFD that the bytes
 * did not spell validly.
 *
 * @param input the request message type, to name fields by their proto names.
 * @param text the request's JSON bytes (decompressed).
 * @throws ConnectError INVALID_ARGUMENT `<field>: not valid UTF-8`, or
 *   `request: not valid UTF-8` when no string holds the bad bytes.
 */
export function requireUtf8Json(input: DescMessage, text: Uint8Array): void {
  if (isUtf8(text)) return;
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(text.buffer, text.byteOffset, text.byteLength).toString("utf8"));
  } catch {
    parsed = undefined;
  }
  throw invalidArgument(badStringPath(parsed, input, "") ?? "request", "not valid UTF-8");
}

/**
 * The path of the first string in `value` (a parsed JSON value) that holds
 * U+FFFD, as proto field names where `desc` knows the key (`snapshot.format`,
 * `items[2]`); `path` is where `value` sits ("" at the top, which reads as
 * `request`); undefined when there is none.
 */
function badStringPath(value: unknown, desc: DescMessage | undefined, path: string): string | undefined {
  if (typeof value === "string") return value.includes(REPLACEMENT) ? path || "request" : undefined;
  if (typeof value !== "object" || value === null) return undefined;
  if (Array.isArray(value)) {
    for (const [i, item] of value.entries()) {
      const found = badStringPath(item, desc, `${path}[${i}]`);
      if (found !== undefined) return found;
    }
    return undefined;
  }
  for (const [key, item] of Object.entries(value)) {
    const field = desc?.fields.find((f) => f.jsonName === key || f.name === key);
    const name = field?.name ?? key;
    const at = path === "" ? name : `${path}.${name}`;
    if (key.includes(REPLACEMENT)) return at;
    const found = badStringPath(item, field?.message, at);
    if (found !== undefined) return found;
  }
  return undefined;
}
