import { create } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { LoadResponseSchema, SessionSnapshotSchema, type LoadResponse } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { encodedInPlace, FRAMING_ROOM_BYTES } from "../rpc/encoded-answer.js";
import { delimitedFieldBytes } from "../rpc/message-size.js";
import type { StoredSnapshot } from "./store.js";

/**
 * The Load answer for `snapshot` (wire-contract.md section 2.3). When the
 * store left headroom before the payload (StoredSnapshot.headroom) and the
 * field headers and the transport's framing fit there, the answer's wire
 * bytes are written around the payload where it lies
 * (rpc/encoded-answer.ts `encodedInPlace`): a 64 MiB Load then costs the
 * main thread no copy, where encoding it copied the payload twice into fresh
 * memory, 120–220 ms during which no other call was answered (issue 11).
 * The message's fields are set either way (the Connect listener encodes it
 * as usual), and its wire bytes are what protobuf-es writes for it: the
 * headers before the payload (LoadResponse.snapshot, SessionSnapshot.format
 * and the tag and length of SessionSnapshot.payload) come from protobuf-es's
 * own writer.
 *
 * @param snapshot the stored snapshot; its headroom bytes are overwritten.
 */
export function loadAnswer(snapshot: StoredSnapshot): LoadResponse {
  const message = create(LoadResponseSchema, { snapshot: { format: snapshot.format, payload: snapshot.payload } });
  const { payload } = snapshot;
  // An empty format is not written at all by protobuf-es (proto3); the service never stores one.
  if (snapshot.format === "" || snapshot.headroom === undefined) return message;
  const inner = delimitedFieldBytes(Buffer.byteLength(snapshot.format, "utf8")) + delimitedFieldBytes(payload.byteLength);
  const header = new BinaryWriter()
    .tag(LoadResponseSchema.field.snapshot.number, WireType.LengthDelimited)
    .uint32(inner)
    .tag(SessionSnapshotSchema.field.format.number, WireType.LengthDelimited)
    .string(snapshot.format)
    .tag(SessionSnapshotSchema.field.payload.number, WireType.LengthDelimited)
    .uint32(payload.byteLength)
    .finish();
  if (snapshot.headroom < FRAMING_ROOM_BYTES + header.byteLength) return message;
  const wire = Buffer.from(payload.buffer, payload.byteOffset - header.byteLength, header.byteLength + payload.byteLength);
  wire.set(header);
  return encodedInPlace(message, wire);
}
