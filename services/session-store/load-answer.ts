import { create } from "@bufbuild/protobuf";
import { LoadResponseSchema, type LoadResponse } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { encodedInPlace, FRAMING_ROOM_BYTES } from "../rpc/encoded-answer.js";
import { delimitedFieldBytes } from "../rpc/message-size.js";
import type { StoredSnapshot } from "./store.js";

/** Tag bytes of the fields written here (session_store.proto): LoadResponse.snapshot = 1 and SessionSnapshot.format = 1 (0x0a), SessionSnapshot.payload = 2 (0x12), all length-delimited. */
const SNAPSHOT_TAG = 0x0a;
const FORMAT_TAG = 0x0a;
const PAYLOAD_TAG = 0x12;

/**
 * The Load answer for `snapshot` (wire-contract.md section 2.3). When the
 * store left headroom before the payload (StoredSnapshot.headroom) and the
 * field headers and the transport's framing fit there, the answer's wire
 * bytes are written around the payload where it lies
 * (rpc/encoded-answer.ts `encodedInPlace`): a 64 MiB Load then costs the
 * main thread no copy, where encoding it copied the payload twice into fresh
 * memory, 120–220 ms during which no other call was answered (issue 11).
 * The message's fields are set either way (the Connect listener encodes it
 * as usual), and its wire bytes are what protobuf-es writes for it.
 *
 * @param snapshot the stored snapshot; its headroom bytes are overwritten.
 */
export function loadAnswer(snapshot: StoredSnapshot): LoadResponse {
  const message = create(LoadResponseSchema, { snapshot: { format: snapshot.format, payload: snapshot.payload } });
  const { payload } = snapshot;
  const format = Buffer.from(snapshot.format, "utf8");
  const inner = delimitedFieldBytes(format.length) + delimitedFieldBytes(payload.byteLength);
  const header = delimitedFieldBytes(inner) - inner + delimitedFieldBytes(format.length) + delimitedFieldBytes(payload.byteLength) - payload.byteLength;
  // An empty format is not written at all by protobuf-es (proto3); the service never stores one.
  if (format.length === 0 || (snapshot.headroom ?? 0) < FRAMING_ROOM_BYTES + header) return message;
  const wire = Buffer.from(payload.buffer, payload.byteOffset - header, header + payload.byteLength);
  let at = 0;
  const varint = (n: number) => {
    for (; n >= 128; n = Math.floor(n / 128)) wire[at++] = (n % 128) | 128;
    wire[at++] = n;
  };
  wire[at++] = SNAPSHOT_TAG;
  varint(inner);
  wire[at++] = FORMAT_TAG;
  varint(format.length);
  at += format.copy(wire, at);
  wire[at++] = PAYLOAD_TAG;
  varint(payload.byteLength);
  if (at !== header) throw new Error(`Load answer header is ${at} bytes, computed ${header}`);
  return encodedInPlace(message, wire);
}
