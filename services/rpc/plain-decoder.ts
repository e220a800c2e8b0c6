import { create, ScalarType, type DescField, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { BinaryReader } from "@bufbuild/protobuf/wire";
import { isWrapperDesc } from "@bufbuild/protobuf/wkt";

/**
 * Decodes the bytes of a message of one type, or answers undefined when the
 * bytes hold anything it does not decode (see {@link plainDecoder}).
 */
export type PlainDecoder<Desc extends DescMessage> = (bytes: Uint8Array) => MessageShape<Desc> | undefined;

/**
 * How one field of a plain message is read: its property, and how its value
 * is read (a scalar or enum), or the plain message it holds. As protobuf-es,
 * the value is read as the field's type says, whatever wire type its tag
 * names.
 */
interface PlainField {
  readonly localName: string;
  readonly read?: (reader: BinaryReader) => unknown;
  readonly message?: PlainMessage;
}

/** A plain message type: its descriptor, and its fields by field number. */
interface PlainMessage {
  readonly desc: DescMessage;
  readonly fields: Map<number, PlainField>;
}

/**
 * How each scalar type is read, as protobuf-es reads it
 * (`fromBinary`): 64-bit integers as bigint, strings checked as UTF-8
 * (decoded by the process's text decoder, common/verbatim-utf8.ts), bytes as
 * a view of the input.
 */
const SCALARS: Record<ScalarType, (reader: BinaryReader) => unknown> = {
  [ScalarType.STRING]: (r) => r.string(true),
  [ScalarType.BYTES]: (r) => r.bytes(),
  [ScalarType.BOOL]: (r) => r.bool(),
  [ScalarType.INT32]: (r) => r.int32(),
  [ScalarType.UINT32]: (r) => r.uint32(),
  [ScalarType.SINT32]: (r) => r.sint32(),
  [ScalarType.INT64]: (r) => r.int64(),
  [ScalarType.UINT64]: (r) => r.uint64(),
  [ScalarType.SINT64]: (r) => r.sint64(),
  [ScalarType.FIXED32]: (r) => r.fixed32(),
  [ScalarType.SFIXED32]: (r) => r.sfixed32(),
  [ScalarType.FLOAT]: (r) => r.float(),
  [ScalarType.FIXED64]: (r) => r.fixed64(),
  [ScalarType.SFIXED64]: (r) => r.sfixed64(),
  [ScalarType.DOUBLE]: (r) => r.double(),
};

/** Message types protobuf-es holds as JSON rather than as their fields (wrappers, unwrapped, are told by `isWrapperDesc`): never plain. */
const JSON_TYPES = new Set(["google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"]);

/** Plain messages by descriptor (null: not plain), made on first use. */
const compiled = new WeakMap<DescMessage, PlainMessage | null>();

/** The decoder of each message type (null: not plain), made on first use. */
const decoders = new WeakMap<DescMessage, PlainDecoder<DescMessage> | null>();

/**
 * The message type `desc` as a {@link PlainMessage}, or null when it or a
 * message it holds has a field protobuf-es gives a form of its own: a list,
 * a map, a oneof member, a group, a 64-bit integer held as a string, a
 * wrapper or Struct.
 */
function compile(desc: DescMessage, seen: Set<DescMessage> = new Set()): PlainMessage | null {
  const known = compiled.get(desc);
  if (known !== undefined) return known;
  // A message that holds itself (directly or not) is left to protobuf-es.
  if (seen.has(desc) || isWrapperDesc(desc) || JSON_TYPES.has(desc.typeName)) return null;
  seen.add(desc);
  const fields = new Map<number, PlainField>();
  let plain = true;
  for (const field of desc.fields) {
    const made = plainField(field, seen);
    if (made === null) plain = false;
    else fields.set(field.number, made);
  }
  const result = plain ? { desc, fields } : null;
  compiled.set(desc, result);
  return result;
}

/** One field as a {@link PlainField}, or null when it is not plain (see {@link compile}). */
function plainField(field: DescField, seen: Set<DescMessage>): PlainField | null {
  if (field.oneof !== undefined) return null;
  switch (field.fieldKind) {
    case "scalar": {
      if (field.longAsString) return null;
      return { localName: field.localName, read: SCALARS[field.scalar] };
    }
    case "enum":
      return field.enum.open ? { localName: field.localName, read: SCALARS[ScalarType.INT32] } : null;
    case "message": {
      if (field.delimitedEncoding) return null;
      const message = compile(field.message, seen);
      return message === null ? null : { localName: field.localName, message };
    }
    default:
      return null;
  }
}

/**
 * Reads the fields of `type` from `reader` up to byte `end` into `target`,
 * as protobuf-es's `fromBinary` reads them: the last value of a scalar wins,
 * a message field given twice is merged.
 *
 * @throws Error on anything else: an unknown field (protobuf-es would keep
 *   it in `$unknown`), a field running past `end` (protobuf-es reads on into
 *   what follows), a string that is not UTF-8, bytes cut short.
 */
function readInto(type: PlainMessage, reader: BinaryReader, end: number, target: Record<string, unknown>): void {
  while (reader.pos < end) {
    const field = type.fields.get(reader.tag()[0]);
    if (field === undefined) throw new Error("not plain");
    if (field.read !== undefined) {
      target[field.localName] = field.read(reader);
      continue;
    }
    // A sub-message running past `end` leaves the reader past it: refused below.
    const stop = reader.uint32() + reader.pos;
    const sub = (target[field.localName] ??= create(field.message!.desc)) as Record<string, unknown>;
    readInto(field.message!, reader, stop, sub);
  }
  if (reader.pos !== end) throw new Error("not plain");
}

/**
 * The decoder for messages of `desc` (made once, then kept) that skips
 * protobuf-es's reflection layer, or undefined when `desc` is not plain: it holds a list, a map, a
 * oneof, a group, a 64-bit integer held as a string, a wrapper or a Struct.
 * Every request of the driver's hottest calls is plain (LoadRequest,
 * RenewRequest, AppendRequest, SaveRequest).
 *
 * Why: protobuf-es's `fromBinary` builds a reflection object (with two
 * `Map`s) for each message and sub-message it decodes: about 3 KB and 2 µs
 * per RenewRequest, an eighth of all the memory a Renew allocates on the
 * main thread (issue 11, bench/RESULTS.md).
 *
 * The decoder answers the message `fromBinary` answers, or undefined for
 * bytes it does not decode as plainly (see {@link readInto}): the caller
 * then decodes them with `fromBinary`, which keeps every error as it was
 * (services/rpc/decode-request.ts). test/unit/plain-decoder.test.ts compares
 * the two on random and damaged messages of every request type.
 */
export function plainDecoder<Desc extends DescMessage>(desc: Desc): PlainDecoder<Desc> | undefined {
  let decoder = decoders.get(desc);
  if (decoder === undefined) {
    const type = compile(desc);
    decoder =
      type === null
        ? null
        : (bytes) => {
            const message = create(desc) as unknown as Record<string, unknown>;
            try {
              readInto(type, new BinaryReader(bytes), bytes.byteLength, message);
            } catch {
              return undefined;
            }
            return message as MessageShape<DescMessage>;
          };
    decoders.set(desc, decoder);
  }
  return (decoder ?? undefined) as PlainDecoder<Desc> | undefined;
}
