/**
 * The largest message the Go harness sends or receives: its client raises both
 * gRPC limits to 64 MiB (`MaxSnapshotBytes = 64 << 20`, wire-contract.md
 * section 1). A record the driver accepts must come back in an answer of at
 * most this size, or the harness (and this server, whose own limit is only
 * 1 MiB larger) could never read it again.
 */
export const HARNESS_MESSAGE_BYTES = 64 * 1024 * 1024;

/** Bytes of a base-128 varint holding `n` (n ≥ 0). */
function varintBytes(n: number): number {
  let bytes = 1;
  while (n >= 128) {
    n = Math.floor(n / 128);
    bytes++;
  }
  return bytes;
}

/**
 * Encoded size of a length-delimited protobuf field (string, bytes or
 * message) with field number below 16 and `n` bytes of content: one tag byte,
 * the length varint, the content.
 */
export function delimitedFieldBytes(n: number): number {
  return 1 + varintBytes(n) + n;
}

/**
 * Encoded size of an answer holding one record `{format, payload}` as its
 * field 1 (Load's snapshot, LoadSchedule's and ClaimSchedule's schedule):
 * `format` as UTF-8 and `payloadBytes` of payload.
 */
export function recordAnswerBytes(format: string, payloadBytes: number): number {
  return delimitedFieldBytes(delimitedFieldBytes(Buffer.byteLength(format, "utf8")) + delimitedFieldBytes(payloadBytes));
}
