import { create } from "@bufbuild/protobuf";
import { TimestampSchema, type Timestamp } from "@bufbuild/protobuf/wkt";

/** Nanoseconds in one second, as a bigint. */
export const NANOS_PER_SECOND = 1_000_000_000n;

/**
 * Converts a protobuf Timestamp to integer nanoseconds since the Unix epoch
 * (bigint), keeping full precision (wire-contract.md section 1: never round
 * through JavaScript Date).
 */
export function timestampToNanos(ts: Timestamp): bigint {
  return ts.seconds * NANOS_PER_SECOND + BigInt(ts.nanos);
}

/**
 * Converts integer nanoseconds since the Unix epoch to a protobuf Timestamp.
 * Negative values are split so that `nanos` stays in [0, 1e9).
 */
export function nanosToTimestamp(nanos: bigint): Timestamp {
  let seconds = nanos / NANOS_PER_SECOND;
  let rest = nanos % NANOS_PER_SECOND;
  if (rest < 0n) {
    rest += NANOS_PER_SECOND;
    seconds -= 1n;
  }
  return create(TimestampSchema, { seconds, nanos: Number(rest) });
}

/** Converts whole microseconds since the epoch to a protobuf Timestamp (number arithmetic while exact: List builds one per entry). */
export function microsToTimestamp(us: number): Timestamp {
  const whole = Math.trunc(us);
  if (!Number.isSafeInteger(whole)) return nanosToTimestamp(BigInt(whole) * 1000n);
  const seconds = Math.floor(whole / 1_000_000);
  return create(TimestampSchema, { seconds: BigInt(seconds), nanos: (whole - seconds * 1_000_000) * 1000 });
}

/** Converts whole milliseconds since the epoch to a protobuf Timestamp. */
export function millisToTimestamp(ms: number): Timestamp {
  return nanosToTimestamp(BigInt(Math.trunc(ms)) * 1_000_000n);
}
