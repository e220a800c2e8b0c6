import { isUtf8 } from "node:buffer";
import { fromBinary, ScalarType, type DescField, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";
import { invalidArgument } from "./errors.js";
import { decodeStringsVerbatim } from "../../common/verbatim-utf8.js";
import { plainDecoder } from "./plain-decoder.js";

// Session ids, owners and every other string are taken as sent, a leading U+FEFF included.
decodeStringsVerbatim();

const WIRE_TYPE_NAMES: Record<number, string> = {
  [WireType.Varint]: "varint",
  [WireType.Bit64]: "64-bit",
  [WireType.LengthDelimited]: "length-delimited",
  [WireType.StartGroup]: "group start",
  [WireType.EndGroup]: "group end",
  [WireType.Bit32]: "32-bit",
};

/** The wire type a field's values are encoded with (packed repeated scalars aside). */
function wireTypeOf(field: DescField): WireType {
  const scalar = field.fieldKind === "scalar" || (field.fieldKind === "list" && field.listKind === "scalar") ? field.scalar : undefined;
  if (field.fieldKind === "enum" || (field.fieldKind === "list" && field.listKind === "enum")) return WireType.Varint;
  switch (scalar) {
    case undefined:
    case ScalarType.STRING:
    case ScalarType.BYTES:
      return WireType.LengthDelimited;
    case ScalarType.DOUBLE:
    case ScalarType.FIXED64:
    case ScalarType.SFIXED64:
      return WireType.Bit64;
    case ScalarType.FLOAT:
    case ScalarType.FIXED32:
    case ScalarType.SFIXED32:
      return WireType.Bit32;
    default:
      return WireType.Varint;
  }
}

/**
 * Walks the encoded fields of `desc` in `bytes` and describes the first
 * problem with a known field, as `path: problem` (path in proto field names,
 * e.g. `snapshot.format`): a wire type the field cannot have, a length past
 * the end, a string that is not UTF-8, or such a problem inside a
 * sub-message. Problems in unknown fields or in the tags themselves are
 * described with `what` (`request` at the top) and the byte offset.
 */
function firstProblem(desc: DescMessage, bytes: Uint8Array, prefix: string, what: string): string | undefined {
  const reader = new BinaryReader(bytes);
  while (reader.pos < reader.len) {
    const at = reader.pos;
    let number: number;
    let wire: WireType;
    try {
      [number, wire] = reader.tag();
    } catch {
      return `${what}: malformed field tag at byte ${at}`;
    }
    const field = desc.fields.find((f) => f.number === number);
    if (field === undefined) {
      try {
        reader.skip(wire, number);
      } catch {
        return `${what}: unknown field ${number} at byte ${at} is malformed or truncated`;
      }
      continue;
    }
    const path = `${prefix}${field.name}`;
    const expected = wireTypeOf(field);
    const packed = field.fieldKind === "list" && wire === WireType.LengthDelimited;
    if (wire !== expected && !packed) {
      return `${path}: sent as ${WIRE_TYPE_NAMES[wire] ?? `wire type ${wire}`}, but the field is ${WIRE_TYPE_NAMES[expected]}`;
    }
    if (wire !== WireType.LengthDelimited) {
      try {
        reader.skip(wire, number);
      } catch {
        return `${path}: truncated value`;
      }
      continue;
    }
    let value: Uint8Array;
    try {
      value = reader.bytes();
    } catch {
      return `${path}: its length runs past the end of the message`;
    }
    if (field.fieldKind === "scalar" && field.scalar === ScalarType.STRING && !isUtf8(value)) return `${path}: not valid UTF-8`;
    const message = field.fieldKind === "message" || (field.fieldKind === "list" && field.listKind === "message") ? field.message : undefined;
    if (message !== undefined) {
      const inner = firstProblem(message, value, `${path}.`, path);
      if (inner !== undefined) return inner;
    }
  }
  return undefined;
}

/**
 * Decodes the request bytes of an RPC whose input is `desc` (protobuf-es
 * binary format). Bytes that are not a valid message are refused with a
 * message naming the field at fault where one is (wire-contract.md section 1
 * requires strings to be UTF-8; docs/DESIGN.md principle 7 requires the field
 * named; issue 10, deliverable 5).
 *
 * A request type without lists, maps or oneofs (most of them) is decoded
 * first by its plain decoder (plain-decoder.ts), which skips protobuf-es's
 * reflection; bytes it does not decode as plainly (an unknown field, any
 * fault) are decoded by protobuf-es, so that the answer, and every error,
 * is protobuf-es's.
 *
 * @throws ConnectError INVALID_ARGUMENT `path: problem` (e.g. `session_id:
 *   not valid UTF-8`), or `request: not a valid <type> message (<reason>)`.
 */
export function decodeRequest<Desc extends DescMessage>(desc: Desc, bytes: Uint8Array): MessageShape<Desc> {
  const decoded = plainDecoder(desc)?.(bytes);
  if (decoded !== undefined) return decoded;
  try {
    return fromBinary(desc, bytes);
  } catch (err) {
    const problem = firstProblem(desc, bytes, "", "request");
    if (problem !== undefined) {
      const cut = problem.indexOf(": ");
      throw invalidArgument(problem.slice(0, cut), problem.slice(cut + 2));
    }
    throw invalidArgument("request", `not a valid ${desc.typeName} message (${(err as Error).message})`);
  }
}
