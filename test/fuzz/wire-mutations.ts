/**
 * Byte-level mutations of an encoded protobuf request, as fast-check
 * arbitraries: the damage a broken or hostile client can do to the bytes of a
 * valid message (issue 10, deliverable 5). Each mutation has a name, so a run
 * can count what it sent.
 */
import fc from "fast-check";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import type { DescMessage } from "@bufbuild/protobuf";

/** A mutation applied to the encoded bytes of a request. */
export interface Mutation {
  /** Short name for statistics, e.g. `truncate` or `invalid-utf8`. */
  name: string;
  apply(bytes: Uint8Array): Uint8Array;
  /** The field a refusal must name, when the mutation makes exactly one field invalid. */
  field?: string;
}

function concat(...parts: Uint8Array[]): Uint8Array {
  return Buffer.concat(parts.map((p) => Buffer.from(p.buffer, p.byteOffset, p.byteLength)));
}

/** One well-formed field: `number` with `wire` type and a payload that fits the type. */
function field(number: number, wire: WireType, value: Uint8Array | bigint | number): Uint8Array {
  const w = new BinaryWriter().tag(number, wire);
  if (wire === WireType.Varint) w.uint64(BigInt(value as bigint | number));
  else if (wire === WireType.Bit64) w.fixed64(BigInt.asUintN(64, BigInt(value as bigint | number)));
  else if (wire === WireType.Bit32) w.fixed32(Number(BigInt.asUintN(32, BigInt(value as bigint | number))));
  else w.bytes(value as Uint8Array);
  return w.finish();
}

/** Sequences that are not UTF-8: a lone continuation byte, an overlong NUL, a surrogate, a truncated sequence, 0xFF. */
const INVALID_UTF8 = [[0x80], [0xc0, 0x80], [0xed, 0xa0, 0x80], [0xe2, 0x82], [0xff], [0xf4, 0x90, 0x80, 0x80], [0x61, 0xfe, 0x62]].map((b) => Uint8Array.from(b));

const fieldNumber = fc.oneof(
  fc.integer({ min: 1, max: 32 }),
  fc.integer({ min: 1, max: 536_870_911 }),
  fc.constantFrom(19_000, 19_999, 536_870_911),
);

/**
 * Mutations for requests of `message`: the field numbers and kinds of its
 * fields let the mutations aim at real fields (wrong wire type, invalid
 * UTF-8 in a string field, a sub-message that is garbage).
 */
export function mutationArb(message: DescMessage): fc.Arbitrary<Mutation> {
  const stringFields = message.fields.filter((f) => f.fieldKind === "scalar" && f.scalar === 9 /* STRING */);
  const knownFields = message.fields.map((f) => f.number);
  const messageFields = message.fields.filter((f) => f.fieldKind === "message").map((f) => ({ number: f.number, message: f.message }));
  const known = knownFields.length > 0 ? fc.constantFrom(...knownFields) : fieldNumber;
  const arbs: Array<fc.Arbitrary<Mutation>> = [
    fc.nat().map((n) => ({ name: "truncate", apply: (b: Uint8Array) => b.subarray(0, b.length === 0 ? 0 : n % b.length) })),
    fc.array(fc.nat(), { minLength: 1, maxLength: 8 }).map((bits) => ({
      name: "bit-flip",
      apply: (b: Uint8Array) => {
        const out = Uint8Array.from(b);
        if (out.length > 0) for (const bit of bits) out[Math.floor(bit / 8) % out.length]! ^= 1 << bit % 8;
        return out;
      },
    })),
    fc.tuple(fieldNumber, fc.constantFrom(WireType.Varint, WireType.Bit64, WireType.LengthDelimited, WireType.Bit32), fc.bigInt(0n, 2n ** 64n - 1n), fc.uint8Array({ maxLength: 64 })).map(
      ([n, wire, v, bytes]) => ({ name: "unknown-field", apply: (b: Uint8Array) => concat(b, field(n, wire, wire === WireType.LengthDelimited ? bytes : v)) }),
    ),
    fc.tuple(known, fc.constantFrom(WireType.Varint, WireType.Bit64, WireType.LengthDelimited, WireType.Bit32), fc.bigInt(0n, 2n ** 64n - 1n), fc.uint8Array({ maxLength: 16 })).map(
      ([n, wire, v, bytes]) => ({ name: "wrong-wire-type", apply: (b: Uint8Array) => concat(b, field(n, wire, wire === WireType.LengthDelimited ? bytes : v)) }),
    ),
    fc.tuple(known, fc.constantFrom(WireType.StartGroup, WireType.EndGroup, 6, 7)).map(([n, wire]) => ({
      name: "bad-wire-type",
      apply: (b: Uint8Array) => concat(b, new BinaryWriter().uint32(((n << 3) | wire) >>> 0).finish()),
    })),
    fc.tuple(fc.nat({ max: 0xffffff }), fc.uint8Array({ maxLength: 8 })).map(([len, tail]) => ({
      name: "length-overrun",
      apply: (b: Uint8Array) => concat(b, new BinaryWriter().tag(knownFields[0] ?? 1, WireType.LengthDelimited).uint32(len + tail.length + 1).finish(), tail),
    })),
    fc.constantFrom(
      { name: "overlong-varint", apply: (b: Uint8Array) => concat(b, Uint8Array.from([0x08, ...new Array<number>(11).fill(0xff), 0x01])) },
      { name: "field-zero", apply: (b: Uint8Array) => concat(b, Uint8Array.from([0x02, 0x01, 0x00])) },
      { name: "duplicate", apply: (b: Uint8Array) => concat(b, b) },
      { name: "lone-tag", apply: (b: Uint8Array) => concat(b, Uint8Array.from([0x0a])) },
    ),
    fc.tuple(fc.uint8Array({ minLength: 1, maxLength: 32 }), fc.nat()).map(([junk, at]) => ({
      name: "splice",
      apply: (b: Uint8Array) => {
        const i = b.length === 0 ? 0 : at % (b.length + 1);
        return concat(b.subarray(0, i), junk, b.subarray(i));
      },
    })),
    fc.uint8Array({ maxLength: 256 }).map((junk) => ({ name: "random-bytes", apply: () => junk })),
  ];
  if (stringFields.length > 0) {
    arbs.push(
      fc.tuple(fc.constantFrom(...stringFields), fc.constantFrom(...INVALID_UTF8), fc.string({ maxLength: 8 })).map(([f, bad, text]) => ({
        name: "invalid-utf8",
        field: f.name,
        // A later occurrence of a scalar field wins, so this replaces the valid value.
        apply: (b: Uint8Array) => concat(b, field(f.number, WireType.LengthDelimited, concat(Buffer.from(text), bad))),
      })),
    );
  }
  if (messageFields.length > 0) {
    arbs.push(
      fc.tuple(fc.constantFrom(...messageFields), fc.uint8Array({ maxLength: 24 })).map(([f, junk]) => ({
        name: "garbage-submessage",
        apply: (b: Uint8Array) => concat(b, field(f.number, WireType.LengthDelimited, junk)),
      })),
    );
  }
  return fc.oneof(...arbs);
}
