import { fromJsonString, type DescMessage } from "@bufbuild/protobuf";
import { invalidArgument } from "./errors.js";

/**
 * Refuses a JSON request text that protobuf-es cannot read as an `input`
 * message, naming the field at fault first (`session_id: ...`), as every other
 * INVALID_ARGUMENT of the server does (docs/DESIGN.md principle 6;
 * wire-contract.md section 1). connect-es reads the text with the same call
 * and the same option (unknown keys ignored), but answers with protobuf-es's
 * own words, which name the field last and by its full type name:
 * `cannot decode field mecatl.driver.v1.LoadRequest.session_id from JSON: 123`
 * (found by a fresh-eyes run). Text that is no JSON at all, or a value that
 * belongs to no one field, is named `request`.
 *
 * The text is read twice (here and by connect-es): JSON requests are at most
 * 1 MiB (connect-request-check.ts `JSON_MESSAGE_BYTES`).
 *
 * @param input the request message type.
 * @param text the request's JSON bytes (decompressed, UTF-8).
 * @throws ConnectError INVALID_ARGUMENT `<field>: cannot be read from JSON (<protobuf-es's reason>)`.
 */
export function requireDecodableJson(input: DescMessage, text: Uint8Array): void {
  try {
    fromJsonString(input, Buffer.from(text.buffer, text.byteOffset, text.byteLength).toString("utf8"), { ignoreUnknownFields: true });
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    const found = /^cannot decode (?:field |message )?([\w.]+) from JSON: ([\s\S]*)$/.exec(message);
    const path = found === null ? undefined : fieldPath(input, found[1]!);
    throw invalidArgument(path ?? "request", `cannot be read from JSON (${found?.[2] ?? message})`);
  }
}

/**
 * The proto path (`snapshot.format`) in `desc` of `name`: a field's full name
 * (`mecatl.driver.v1.Snapshot.format`) or a message type's; "request" for
 * `desc` itself; undefined when no field of `desc` or of its nested messages
 * matches (the first match, depth first, each message type visited once).
 */
function fieldPath(desc: DescMessage, name: string, prefix = "", seen = new Set<string>()): string | undefined {
  if (prefix === "" && desc.typeName === name) return "request";
  seen.add(desc.typeName);
  for (const field of desc.fields) {
    const at = prefix === "" ? field.name : `${prefix}.${field.name}`;
    if (`${desc.typeName}.${field.name}` === name || field.message?.typeName === name) return at;
    if (field.message !== undefined && !seen.has(field.message.typeName)) {
      const found = fieldPath(field.message, name, at, seen);
      if (found !== undefined) return found;
    }
  }
  return undefined;
}
