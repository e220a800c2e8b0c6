import { LeaseResponseSchema, type LeaseResponse } from "../../gen/mecatl/driver/v1/session_lease_pb.js";
import { encodedAnswer } from "../rpc/encoded-answer.js";
import { WireWriter } from "../rpc/wire-writer.js";
import type { LeaseHold } from "./rules.js";

const MICROS_PER_SECOND = 1_000_000n;

/**
 * The LeaseResponse of Acquire and Renew (wire-contract.md section 4.3) for
 * a hold on `sessionId`: `lease.session_id`, `owner`, `token` and `expiry`
 * (a Timestamp of the hold's expiry, microseconds made nanoseconds), with
 * its wire bytes written here (rpc/wire-writer.ts) rather than by
 * protobuf-es's `toBinary`; the gRPC adapter sends them as they are and the
 * Connect listener writes them back as the message's one field
 * (rpc/encoded-answer.ts). The bytes are those `toBinary` writes for the
 * same Lease (test/rpc/wire-writer.test.ts).
 */
export function leaseAnswer(sessionId: string, hold: LeaseHold): LeaseResponse {
  // Floor division, so that nanos stays in [0, 1e9) for an expiry before 1970 too (as nanosToTimestamp).
  let seconds = hold.expiryUs / MICROS_PER_SECOND;
  if (seconds * MICROS_PER_SECOND > hold.expiryUs) seconds -= 1n;
  const nanos = Number(hold.expiryUs - seconds * MICROS_PER_SECOND) * 1000;
  // int64 on the wire: a negative value is its 64-bit two's complement.
  const secondsWire = BigInt.asUintN(64, seconds);
  const idBytes = Buffer.byteLength(sessionId, "utf8");
  const ownerBytes = Buffer.byteLength(hold.owner, "utf8");
  const expiryBytes = WireWriter.varintFieldBytes(secondsWire) + WireWriter.varintFieldBytes(nanos);
  const leaseBytes = WireWriter.stringFieldBytes(idBytes) + WireWriter.stringFieldBytes(ownerBytes) + WireWriter.varintFieldBytes(hold.token) + WireWriter.delimitedFieldBytes(expiryBytes);
  const w = new WireWriter(WireWriter.delimitedFieldBytes(leaseBytes));
  w.delimited(1, leaseBytes);
  w.string(1, sessionId, idBytes);
  w.string(2, hold.owner, ownerBytes);
  w.varintField(3, hold.token);
  w.delimited(4, expiryBytes);
  w.varintField(1, secondsWire);
  w.varintField(2, nanos);
  return encodedAnswer(LeaseResponseSchema, 1, w.finish());
}
