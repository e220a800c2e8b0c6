import { describe, expect, test } from "vitest";
import { fromBinary, toBinary } from "@bufbuild/protobuf";
import { LoadResponseSchema } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { PAYLOAD_HEADROOM_BYTES, withHeadroom } from "../../common/payload-headroom.js";
import { FRAMING_ROOM_BYTES, hasFramingRoom, preEncoded } from "../../services/rpc/encoded-answer.js";
import { loadAnswer } from "../../services/session-store/load-answer.js";
import { frameInPlace } from "../../services/server/grpc-framed-answers.js";

/** A payload of `n` bytes with headroom before it, as a store's large Load gives it. */
function roomyPayload(n: number): Buffer {
  const payload = withHeadroom(n);
  for (let i = 0; i < n; i++) payload[i] = (i * 31 + 7) & 0xff;
  return payload;
}

describe("the Load answer framed around its payload (issue 11: a large Load costs the main thread no copy)", () => {
  // Lengths at the varint boundaries of the payload and of the message around it (1, 2, 3 and 4 bytes).
  const sizes = [1, 100, 127, 128, 16_383, 16_384, 2 ** 21 - 20, 2 ** 21, 3 * 1024 * 1024 + 5];

  test("its wire bytes are what protobuf-es writes for the same message, for payloads at every varint boundary", () => {
    for (const n of sizes) {
      const payload = roomyPayload(n);
      const answer = loadAnswer({ format: "sessnap-json/1", payload, headroom: PAYLOAD_HEADROOM_BYTES });
      const wire = preEncoded(answer);
      expect(wire, `payload of ${n} bytes`).toBeDefined();
      expect(hasFramingRoom(wire!)).toBe(true);
      expect(Buffer.compare(wire!, Buffer.from(toBinary(LoadResponseSchema, answer))), `payload of ${n} bytes`).toBe(0);
      // The payload itself is untouched and is the answer's last bytes, where it lay.
      expect(wire!.buffer).toBe(payload.buffer);
      expect(wire!.byteOffset + wire!.byteLength).toBe(payload.byteOffset + payload.byteLength);
      expect(Buffer.compare(Buffer.from(fromBinary(LoadResponseSchema, wire!).snapshot!.payload), roomyPayload(n))).toBe(0);
    }
  });

  test("formats up to the headroom fit around the payload; a longer one, or too little or no headroom, gets the payload copied once behind the headers", () => {
    const fits = "f".repeat(PAYLOAD_HEADROOM_BYTES - FRAMING_ROOM_BYTES - 12);
    const roomy = roomyPayload(2 ** 21);
    const answer = loadAnswer({ format: fits, payload: roomy, headroom: PAYLOAD_HEADROOM_BYTES });
    expect(preEncoded(answer)!.buffer).toBe(roomy.buffer);
    expect(Buffer.compare(preEncoded(answer)!, Buffer.from(toBinary(LoadResponseSchema, answer)))).toBe(0);
    const plain = (n: number) => Buffer.from(roomyPayload(n).subarray(0));
    for (const snapshot of [
      { format: `${fits}f`, payload: roomyPayload(2 ** 21), headroom: PAYLOAD_HEADROOM_BYTES },
      { format: "sessnap-json/1", payload: Buffer.from(plain(100)) },
      { format: "sessnap-json/1", payload: roomyPayload(100), headroom: 10 },
      { format: "sessnap-json/1", payload: Buffer.from(plain(1024)) },
      { format: "sessnap-json/1", payload: Buffer.from(plain(200_000)) },
    ]) {
      const what = JSON.stringify({ format: snapshot.format.length, bytes: snapshot.payload.byteLength, headroom: snapshot.headroom });
      const before = Buffer.from(snapshot.payload);
      const answer = loadAnswer(snapshot);
      const wire = preEncoded(answer);
      expect(wire, what).toBeDefined();
      expect(hasFramingRoom(wire!), what).toBe(true);
      // A copy: the answer (with its framing room) shares no byte with the stored payload (small buffers may share Node's pool).
      const apart = wire!.buffer !== snapshot.payload.buffer || wire!.byteOffset - FRAMING_ROOM_BYTES >= snapshot.payload.byteOffset + snapshot.payload.byteLength || wire!.byteOffset + wire!.byteLength <= snapshot.payload.byteOffset;
      expect(apart, what).toBe(true);
      expect(Buffer.compare(wire!, Buffer.from(toBinary(LoadResponseSchema, answer))), what).toBe(0);
      expect(Buffer.compare(Buffer.from(fromBinary(LoadResponseSchema, wire!).snapshot!.payload), before), what).toBe(0);
      // Framing writes only into the answer's own room, never into the stored payload's buffer.
      frameInPlace(wire!);
      expect(Buffer.compare(Buffer.from(snapshot.payload), before), what).toBe(0);
      expect(answer.snapshot?.format).toBe(snapshot.format);
      expect(answer.snapshot?.payload).toBe(snapshot.payload);
    }
  });

  test("an empty format or payload is left to protobuf-es (proto3 leaves such a field out)", () => {
    for (const snapshot of [
      { format: "", payload: roomyPayload(100), headroom: PAYLOAD_HEADROOM_BYTES },
      { format: "sessnap-json/1", payload: new Uint8Array(0) },
    ]) {
      const answer = loadAnswer(snapshot);
      expect(preEncoded(answer)).toBeUndefined();
      expect(answer.snapshot?.format).toBe(snapshot.format);
    }
  });

  test("the gRPC framing goes into the room before the wire bytes: a flag byte 0 and the big-endian length", () => {
    const payload = roomyPayload(70_000);
    const wire = preEncoded(loadAnswer({ format: "sessnap-json/1", payload, headroom: PAYLOAD_HEADROOM_BYTES }))!;
    const copy = Buffer.from(wire);
    const frame = frameInPlace(wire);
    expect(frame.buffer).toBe(payload.buffer);
    expect(frame[0]).toBe(0);
    expect(frame.readUInt32BE(1)).toBe(wire.byteLength);
    expect(Buffer.compare(frame.subarray(FRAMING_ROOM_BYTES), copy)).toBe(0);
  });
});
