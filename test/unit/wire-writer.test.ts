import { describe, expect, test } from "vitest";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { LeaseResponseSchema } from "../../gen/mecatl/driver/v1/session_lease_pb.js";
import { AppendResponseSchema } from "../../gen/mecatl/driver/v1/event_log_pb.js";
import { preEncoded, stringAnswer } from "../../services/rpc/encoded-answer.js";
import { WireWriter } from "../../services/rpc/wire-writer.js";
import { leaseAnswer } from "../../services/session-lease/lease-answer.js";
import { nanosToTimestamp } from "../../services/rpc/timestamp.js";

/** What protobuf-es writes for the Lease answer of a hold (the encoding the hand-written one must equal). */
function protobufEsLease(sessionId: string, owner: string, token: bigint, expiryUs: bigint): Buffer {
  return Buffer.from(toBinary(LeaseResponseSchema, create(LeaseResponseSchema, { lease: { sessionId, owner, token, expiry: nanosToTimestamp(expiryUs * 1000n) } })));
}

describe("answers written by the wire writer (issue 11: Renew and Append answers without toBinary)", () => {
  // Values at the varint boundaries (1, 2, 3, 5 and 10 bytes), the uint64 limit, empty and multi-byte strings.
  const tokens = [1n, 127n, 128n, 16_383n, 16_384n, 2n ** 31n - 1n, 2n ** 31n, 2n ** 53n + 1n, 2n ** 63n, 2n ** 64n - 1n];
  const expiries = [0n, 1n, 999_999n, 1_000_000n, 1_796_306_515_499_123n, -1n, -1_000_001n, 2n ** 62n];
  const ids = ["s", "séance-✓-🙂", "x".repeat(127), "y".repeat(128), "z".repeat(20_000)];

  test("a Lease answer is byte for byte what protobuf-es writes, for tokens, expiries and ids at every varint boundary", () => {
    for (const token of tokens) {
      for (const expiryUs of expiries) {
        for (const [i, sessionId] of ids.entries()) {
          const owner = ids[(i + 1) % ids.length]!;
          const wire = preEncoded(leaseAnswer(sessionId, { owner, token, expiryUs }));
          expect(wire, "a Lease answer carries its wire bytes").toBeDefined();
          expect(Buffer.compare(wire!, protobufEsLease(sessionId, owner, token, expiryUs)), `token ${token}, expiry ${expiryUs} µs, id of ${sessionId.length}`).toBe(0);
        }
      }
    }
  });

  test("a Lease answer decodes to its hold, and encodes again (the Connect listener's path) to the same bytes", () => {
    const answer = leaseAnswer("session-1", { owner: "owner-1", token: 42n, expiryUs: 1_796_306_515_499_123n });
    const decoded = fromBinary(LeaseResponseSchema, preEncoded(answer)!);
    expect(decoded.lease).toMatchObject({ sessionId: "session-1", owner: "owner-1", token: 42n });
    expect(decoded.lease!.expiry).toMatchObject({ seconds: 1_796_306_515n, nanos: 499_123_000 });
    expect(Buffer.compare(Buffer.from(toBinary(LeaseResponseSchema, answer)), preEncoded(answer)!)).toBe(0);
  });

  test("a string answer is what protobuf-es writes for the same message; an empty string is the empty message", () => {
    for (const cursor of ["", "c", "ü".repeat(64), "q".repeat(200_000)]) {
      const wire = preEncoded(stringAnswer(AppendResponseSchema, 1, cursor)) ?? Buffer.alloc(0);
      expect(Buffer.compare(wire, Buffer.from(toBinary(AppendResponseSchema, create(AppendResponseSchema, { cursor })))), `cursor of ${cursor.length}`).toBe(0);
      expect(fromBinary(AppendResponseSchema, wire).cursor).toBe(cursor);
    }
  });

  test("varints of numbers and bigints up to their limits (2^53 - 1 and 2^64 - 1) are what protobuf-es's BinaryWriter writes", () => {
    const values: Array<number | bigint> = [1, 127, 128, 2 ** 31 - 1, 2 ** 31, 2 ** 32, 2 ** 32 + 5, 2 ** 40 + 3, 2 ** 53 - 1, 2n ** 32n, 2n ** 64n - 1n];
    for (const n of values) {
      const w = new WireWriter(WireWriter.varintFieldBytes(n));
      w.varintField(1, n);
      const expected = new BinaryWriter().tag(1, WireType.Varint).uint64(n).finish();
      expect(Buffer.compare(w.finish(), Buffer.from(expected)), `varint of ${n}`).toBe(0);
    }
  });

  test("a size computed wrong is refused when the message is finished, not sent short or long", () => {
    const short = new WireWriter(3);
    short.varintField(1, 5);
    expect(() => short.finish()).toThrow(RangeError);
    const exact = new WireWriter(WireWriter.varintFieldBytes(300) + WireWriter.stringFieldBytes(2));
    exact.varintField(1, 300);
    exact.string(2, "ab", 2);
    expect([...exact.finish()]).toEqual([0x08, 0xac, 0x02, 0x12, 0x02, 0x61, 0x62]);
  });
});
