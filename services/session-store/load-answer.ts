import { create } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { LoadResponseSchema, SessionSnapshotSchema, type LoadResponse } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { encodedInPlace, FRAMING_ROOM_BYTES } from "../rpc/encoded-answer.js";
import { delimitedFieldBytes } from "../rpc/message-size.js";
import type { StoredSnapshot } from "./store.js";

/**
 * The Load answer for `snapshot` (wire-contract.md section 2.3), with its
 * wire bytes made here rather than by protobuf-es's `toBinary`
 * (rpc/encoded-answer.ts `encodedInPlace`), and room before them for the
 * transport's framing, so that the gRPC adapter sends them as they lie:
 *
 * - When the store left headroom before the payload (StoredSnapshot.headroom)
 *   and the field headers and the framing fit there, they are written around
 *   the payload where it lies: a 64 MiB Load then costs the main thread no
 *   copy, where encoding it copied the payload twice into fresh memory,
 *   120–220 ms during which no other call was answered (issue 11).
 * - Otherwise (a payload of at most 1 MiB held inline, read with no
 *   headroom) the payload is copied once, behind the headers, into a buffer
 *   with that room: one copy where `toBinary` and the transport's framing
 *   made two, and none of `toBinary`'s per-field work (about 12 µs of the
 *   main thread for a 1 KiB Load; bench/RESULTS.md).
 *
 * The message's fields are set either way (the Connect listener encodes it
 * as usual), and its wire bytes are what protobuf-es writes for it: the
 * headers before the payload (LoadResponse.snapshot, SessionSnapshot.format
 * and the tag and length of SessionSnapshot.payload) come from protobuf-es's
 * own writer. An empty format or payload (the service stores neither) is
 * encoded by protobuf-es, which leaves such a field out (proto3).
 *
 * @param snapshot the stored snapshot; its headroom bytes are overwritten.
 */
export function loadAnswer(snapshot: StoredSnapshot): LoadResponse {
  const message = create(LoadResponseSchema, { snapshot: { format: snapshot.format, payload: snapshot.payload } });
  const { payload } = snapshot;
  if (snapshot.format === "" || payload.byteLength === 0) return message;
  const header = loadHeader(snapshot.format, payload.byteLength);
  const room = FRAMING_ROOM_BYTES + header.byteLength;
  let wire: Buffer;
  if (snapshot.headroom !== undefined && snapshot.headroom >= room) {
    wire = Buffer.from(payload.buffer, payload.byteOffset - header.byteLength, header.byteLength + payload.byteLength);
  } else {
    const out = Buffer.allocUnsafe(room + payload.byteLength);
    out.set(payload, room);
    wire = out.subarray(FRAMING_ROOM_BYTES);
  }
  wire.set(header);
  return encodedInPlace(message, wire);
}

/** The LoadResponse bytes before the payload of a snapshot of `format` whose payload is `payloadBytes` long. */
function loadHeader(format: string, payloadBytes: number): Uint8Array {
  const inner = delimitedFieldBytes(Buffer.byteLength(format, "utf8")) + delimitedFieldBytes(payloadBytes);
  return new BinaryWriter()
    .tag(LoadResponseSchema.field.snapshot.number, WireType.LengthDelimited)
    .uint32(inner)
    .tag(SessionSnapshotSchema.field.format.number, WireType.LengthDelimited)
    .string(format)
    .tag(SessionSnapshotSchema.field.payload.number, WireType.LengthDelimited)
    .uint32(payloadBytes)
    .finish();
}
