import { fromJson, type DescField, type DescMessage, type JsonValue } from "@bufbuild/protobuf";
import { invalidArgument } from "./errors.js";

/** How connect-es reads JSON requests: unknown keys are ignored. */
const READ_OPTIONS = { ignoreUnknownFields: true };

/** Decodes as connect-es decodes a JSON request: a leading byte-order mark is dropped. */
const utf8 = new TextDecoder();

/**
 * Refuses a JSON request text that protobuf-es cannot read as an `input`
 * message, naming the field at fault first (`session_id: ...`), as every other
 * INVALID_ARGUMENT of the server does (docs/DESIGN.md principle 6;
 * wire-contract.md section 1). connect-es reads the text with the same call
 * and the same option (unknown keys ignored), but answers with protobuf-es's
 * own words, which name the field last and by its full type name:
 * `cannot decode field mecatl.driver.v1.LoadRequest.session_id from JSON: 123`
 * (found by a fresh-eyes run). Text that is no JSON at all, or an error that
 * fits no one field, is named `request`.
 *
 * The text is parsed twice (here, once, and by connect-es): JSON requests
 * are at most 1 MiB (connect-request-check.ts `JSON_MESSAGE_BYTES`).
 *
 * @param input the request message type.
 * @param text the request's JSON bytes (decompressed, UTF-8, a leading byte-order mark allowed as connect-es allows it).
 * @throws ConnectError INVALID_ARGUMENT `<field>: cannot be read from JSON (<protobuf-es's reason>)`.
 */
export function requireDecodableJson(input: DescMessage, text: Uint8Array): void {
  let parsed: JsonValue;
  try {
    parsed = JSON.parse(utf8.decode(text)) as JsonValue;
  } catch (err) {
    throw invalidArgument("request", `cannot be read from JSON (${(err as Error).message})`);
  }
  try {
    fromJson(input, parsed, READ_OPTIONS);
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    const found = /^cannot decode (?:field |message )?([\w.]+) from JSON: ([\s\S]*)$/.exec(message);
    const path = found === null ? undefined : faultyPath(input, found[1]!, parsed);
    throw invalidArgument(path ?? "request", `cannot be read from JSON (${found?.[2] ?? message})`);
  }
}

/**
 * A field of the request that protobuf-es's error may mean: the fields
 * leading to it from the top (its proto path), and how to tell whether it is
 * the one at fault: the message `desc` that fails to read the JSON value
 * reached by `valueAt` (the field itself for a type protobuf-es names, else
 * the message holding the field).
 */
interface Candidate {
  fields: DescField[];
  valueAt: DescField[];
  desc: DescMessage;
}

/**
 * The proto path (`snapshot.format`) of the field protobuf-es's error names
 * by `name`: a field's full name (`mecatl.driver.v1.Snapshot.format`) or,
 * for a well-known type such as a Timestamp, only the type
 * (`google.protobuf.Timestamp`). "request" when `name` is `input` itself.
 * When several fields fit (two Timestamps in one request), each one's value
 * in `parsed` is read alone and the first that fails is named; undefined
 * when none can be told apart, rather than a wrong one.
 */
function faultyPath(input: DescMessage, name: string, parsed: JsonValue): string | undefined {
  if (input.typeName === name) return "request";
  const candidates: Candidate[] = [];
  collect(input, name, [], new Set(), candidates);
  const named = candidates.length <= 1 ? candidates[0] : candidates.find((c) => fails(c, parsed));
  return named?.fields.map((f) => f.name).join(".");
}

/** Adds to `out` every field under `desc` (through singular message fields, each type once per path) that `name` may mean. */
function collect(desc: DescMessage, name: string, above: DescField[], seen: Set<string>, out: Candidate[]): void {
  seen.add(desc.typeName);
  for (const field of desc.fields) {
    const fields = [...above, field];
    if (field.fieldKind === "message" && field.message.typeName === name) out.push({ fields, valueAt: fields, desc: field.message });
    else if (`${desc.typeName}.${field.name}` === name) out.push({ fields, valueAt: above, desc });
    if (field.fieldKind === "message" && !seen.has(field.message.typeName)) collect(field.message, name, fields, new Set(seen), out);
  }
}

/** True when candidate `c`'s value in `parsed` is there and its message cannot read it. */
function fails(c: Candidate, parsed: JsonValue): boolean {
  let value: JsonValue | undefined = parsed;
  for (const f of c.valueAt) value = valueOf(value, f);
  if (value === undefined) return false;
  try {
    fromJson(c.desc, value, READ_OPTIONS);
    return false;
  } catch {
    return true;
  }
}

/** The value of `field` in the JSON object `value` (under its JSON name or its proto name); undefined when absent or `value` is no object. */
function valueOf(value: JsonValue | undefined, field: DescField): JsonValue | undefined {
  if (value === null || value === undefined || typeof value !== "object" || Array.isArray(value)) return undefined;
  return value[field.jsonName] ?? value[field.name];
}
