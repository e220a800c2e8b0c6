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

/** Bytes of the varint of an int64 field holding `v` (ten for any negative value). */
function int64VarintBytes(v: bigint): number {
  if (v < 0n) return 10;
  if (v <= BigInt(Number.MAX_SAFE_INTEGER)) return varintBytes(Number(v));
  let bytes = 1;
  for (; v >= 128n; v >>= 7n) bytes++;
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
 * Encoded size of a `google.protobuf.Timestamp` message (1 `seconds` int64,
 * 2 `nanos` int32; a zero field is not encoded, a negative one takes ten
 * bytes as every negative int64 varint does).
 */
export function timestampBytes(ts: { seconds: bigint; nanos: number }): number {
  return (ts.seconds === 0n ? 0 : 1 + int64VarintBytes(ts.seconds)) + (ts.nanos === 0 ? 0 : 1 + (ts.nanos < 0 ? 10 : varintBytes(ts.nanos)));
}
