import { describe, expect, test } from "vitest";
import { create, equals, fromBinary, ScalarType, toBinary, type DescField, type DescMessage } from "@bufbuild/protobuf";
import { EventLogService } from "../../gen/mecatl/driver/v1/event_log_pb.js";
import { ScheduleOneShotReArmerService, ScheduleStoreService } from "../../gen/mecatl/driver/v1/schedule_store_pb.js";
import { SessionLeaseService } from "../../gen/mecatl/driver/v1/session_lease_pb.js";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { plainDecoder } from "../../services/rpc/plain-decoder.js";
import { decodeRequest } from "../../services/rpc/decode-request.js";

const SERVICES = [SessionStoreService, SessionLeaseService, EventLogService, ScheduleStoreService, ScheduleOneShotReArmerService];
/** Every request type of the driver's services. */
const REQUESTS = [...new Map(SERVICES.flatMap((s) => s.methods.map((m) => [m.input.typeName, m.input] as const))).values()];

/** Deterministic pseudo-random numbers (a fixed LCG), so a failure repeats. */
function lcg(seed: number): () => number {
  let x = seed;
  return () => ((x = (x * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
}

/** Texts that test the UTF-8 rules: a byte order mark kept as sent, multi-byte and astral characters, the empty text. */
const TEXTS = ["", "a", "\ufeffsession", "sess-ü-€-😀", "x".repeat(300), "lease-12"];

/** A random value for a scalar field of type `scalar`. */
function scalarValue(scalar: ScalarType, random: () => number): unknown {
  const big = () => BigInt(Math.floor(random() * 2 ** 53)) * (random() < 0.3 ? -1n : 1n);
  switch (scalar) {
    case ScalarType.STRING:
      return TEXTS[Math.floor(random() * TEXTS.length)];
    case ScalarType.BYTES:
      return Uint8Array.from({ length: Math.floor(random() * 40) }, () => Math.floor(random() * 256));
    case ScalarType.BOOL:
      return random() < 0.5;
    case ScalarType.INT64:
    case ScalarType.SINT64:
    case ScalarType.SFIXED64:
      return big();
    case ScalarType.UINT64:
    case ScalarType.FIXED64: {
      const v = big();
      return v < 0n ? -v : v;
    }
    case ScalarType.FLOAT:
    case ScalarType.DOUBLE:
      return Math.fround(random() * 1000);
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      return Math.floor(random() * 2 ** 32);
    default:
      return Math.floor(random() * 2 ** 31) * (random() < 0.3 ? -1 : 1);
  }
}

/** A random message of `desc`: each field set or not, sub-messages to depth 3. */
function randomMessage(desc: DescMessage, random: () => number, depth = 0): Record<string, unknown> {
  const init: Record<string, unknown> = {};
  for (const field of desc.fields) {
    if (random() < 0.3) continue;
    const value = fieldValue(field, random, depth);
    if (value !== undefined) init[field.localName] = value;
  }
  return init;
}

function fieldValue(field: DescField, random: () => number, depth: number): unknown {
  if (field.oneof !== undefined) return undefined;
  switch (field.fieldKind) {
    case "scalar":
      return scalarValue(field.scalar, random);
    case "enum":
      return field.enum.values[Math.floor(random() * field.enum.values.length)]!.number;
    case "message":
      return depth < 3 ? randomMessage(field.message, random, depth + 1) : undefined;
    case "list":
      return field.listKind === "scalar" ? [scalarValue(field.scalar, random)] : field.listKind === "message" && depth < 3 ? [randomMessage(field.message, random, depth + 1)] : undefined;
    default:
      return undefined;
  }
}

/** `bytes` damaged in one of several ways: a byte changed, cut short, a byte inserted, an unknown or mistyped field added. */
function damaged(bytes: Uint8Array, random: () => number): Uint8Array {
  const at = Math.floor(random() * (bytes.length + 1));
  const b = Buffer.from(bytes);
  switch (Math.floor(random() * 6)) {
    case 0:
      if (b.length > 0) b[Math.min(at, b.length - 1)] = Math.floor(random() * 256);
      return b;
    case 1:
      return b.subarray(0, at);
    case 2:
      return Buffer.concat([b.subarray(0, at), Buffer.from([Math.floor(random() * 256)]), b.subarray(at)]);
    case 3:
      // Field 15, varint: unknown to every request.
      return Buffer.concat([b, Buffer.from([15 << 3, 1])]);
    case 4:
      // Field 1 as a varint: a wire type a string, bytes or message field cannot have.
      return Buffer.concat([b, Buffer.from([1 << 3, 5])]);
    default:
      // Invalid UTF-8 as field 1 (a string in most requests).
      return Buffer.concat([b, Buffer.from([(1 << 3) | 2, 2, 0xc3, 0x28])]);
  }
}

/** What protobuf-es's fromBinary answers for `bytes`: the message, or "throws". */
function reference(desc: DescMessage, bytes: Uint8Array): unknown {
  try {
    return fromBinary(desc, bytes);
  } catch {
    return "throws";
  }
}

describe("plain-decoder (issue 11: requests decoded without protobuf-es's reflection, with the same answers)", () => {
  test("the hottest requests have a plain decoder", () => {
    for (const desc of [SessionStoreService.method.load.input, SessionStoreService.method.save.input, SessionLeaseService.method.renew.input, EventLogService.method.append.input]) {
      expect(plainDecoder(desc), desc.typeName).toBeDefined();
    }
  });

  test("every request type: where the plain decoder answers, it answers what fromBinary answers; where fromBinary fails, it does not answer", () => {
    const random = lcg(7);
    let plainAnswers = 0;
    let leftToProtobufEs = 0;
    for (const desc of REQUESTS) {
      const decode = plainDecoder(desc);
      if (decode === undefined) continue;
      for (let run = 0; run < 300; run++) {
        const whole = toBinary(desc, create(desc, randomMessage(desc, random) as never));
        // Two encodings one after the other: scalars of the second win, sub-messages merge.
        const twice = Buffer.concat([whole, toBinary(desc, create(desc, randomMessage(desc, random) as never))]);
        for (const bytes of [whole, twice, damaged(whole, random), damaged(twice, random)]) {
          const expected = reference(desc, bytes);
          const ours = decode(bytes);
          if (ours === undefined) {
            leftToProtobufEs++;
            continue;
          }
          plainAnswers++;
          expect(expected, `${desc.typeName} ${Buffer.from(bytes).toString("hex")}`).not.toBe("throws");
          expect(ours).toStrictEqual(expected);
          expect(equals(desc, ours, expected as never)).toBe(true);
        }
      }
    }
    // Both branches were taken many times: the comparison is not empty.
    expect(plainAnswers).toBeGreaterThan(3000);
    expect(leftToProtobufEs).toBeGreaterThan(1000);
  });

  test("a string that is not UTF-8, an unknown field or a mistyped field is left to protobuf-es, so decodeRequest's errors are unchanged", () => {
    const desc = SessionStoreService.method.load.input;
    const decode = plainDecoder(desc)!;
    const notUtf8 = Buffer.from([(1 << 3) | 2, 2, 0xc3, 0x28]);
    expect(decode(notUtf8)).toBeUndefined();
    expect(() => decodeRequest(desc, notUtf8)).toThrow("session_id: not valid UTF-8");
    expect(decode(Buffer.from([(1 << 3) | 2, 1, 0x61, 15 << 3, 1]))).toBeUndefined();
    expect(decodeRequest(desc, Buffer.from([(1 << 3) | 2, 1, 0x61, 15 << 3, 1])).$unknown).toHaveLength(1);
    expect(decode(Buffer.from([1 << 3, 5]))).toBeUndefined();
    expect(decode(Buffer.from([(1 << 3) | 2, 9, 0x61]))).toBeUndefined();
    expect(() => decodeRequest(desc, Buffer.from([(1 << 3) | 2, 9, 0x61]))).toThrow("session_id: its length runs past the end of the message");
    // A byte order mark is kept, as the process's protobuf-es decoding keeps it (common/verbatim-utf8.ts).
    expect(decodeRequest(desc, toBinary(desc, create(desc, { sessionId: "\ufeffs" }))).sessionId).toBe("\ufeffs");
    expect(decode(toBinary(desc, create(desc, { sessionId: "\ufeffs" })))?.sessionId).toBe("\ufeffs");
  });

  test("a sub-message whose last field runs past the sub-message's length is left to protobuf-es", () => {
    const desc = SessionLeaseService.method.renew.input;
    // lease (field 1) of 3 bytes whose session_id (field 1) says 4 bytes: protobuf-es reads on into the parent's bytes.
    const bytes = Buffer.from([(1 << 3) | 2, 3, (1 << 3) | 2, 4, 0x61, 0x62, 0x63, 0x64]);
    expect(plainDecoder(desc)!(bytes)).toBeUndefined();
  });
});
