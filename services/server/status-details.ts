import { create, toBinary, type DescMessage } from "@bufbuild/protobuf";
import { anyPack } from "@bufbuild/protobuf/wkt";
import type { ConnectError } from "@connectrpc/connect";
import { StatusSchema } from "../../gen/google/rpc/status_pb.js";

/**
 * Encodes a ConnectError as the binary `google.rpc.Status` carried in the
 * `grpc-status-details-bin` trailer: code, message and every outgoing detail
 * packed as `google.protobuf.Any` with a `type.googleapis.com/` type URL
 * (wire-contract.md section 3.7). Returns undefined when the error has no
 * outgoing details, so plain errors send no trailer.
 */
export function encodeStatusDetails(err: ConnectError): Uint8Array | undefined {
  const details = err.details.flatMap((d) => {
    if (!("desc" in d)) return [];
    const desc = d.desc as DescMessage;
    return [anyPack(desc, create(desc, d.value as never))];
  });
  if (details.length === 0) return undefined;
  return toBinary(StatusSchema, create(StatusSchema, { code: err.code, message: err.rawMessage, details }));
}
