import type { Timestamp } from "@bufbuild/protobuf/wkt";
import { nanosToTimestamp, timestampToNanos, NANOS_PER_SECOND } from "../services/rpc/timestamp.js";

/**
 * A point in time given to a client: a `Date` (millisecond precision) or a
 * bigint of nanoseconds since the Unix epoch (full precision; the schedule
 * store compares instants to the nanosecond, wire-contract.md section 5.5).
 */
export type Instant = Date | bigint;

/** Nanoseconds since the epoch of an {@link Instant}. */
export function instantToNanos(at: Instant): bigint {
  return typeof at === "bigint" ? at : BigInt(at.getTime()) * 1_000_000n;
}

/** The protobuf Timestamp of an {@link Instant}. */
export function instantToTimestamp(at: Instant): Timestamp {
  return nanosToTimestamp(instantToNanos(at));
}

/** Nanoseconds since the epoch of an optional Timestamp; undefined when unset. */
export function optionalNanos(ts: Timestamp | undefined): bigint | undefined {
  return ts === undefined ? undefined : timestampToNanos(ts);
}

/** The current time in nanoseconds since the epoch (millisecond resolution, from `Date.now()`). */
export function nowNanos(): bigint {
  return BigInt(Date.now()) * 1_000_000n;
}

/** Formats nanoseconds since the epoch as RFC 3339 UTC with all nine fraction digits, e.g. `2025-01-02T03:04:05.123456789Z`. */
export function formatNanos(nanos: bigint): string {
  const { seconds, nanos: rest } = nanosToTimestamp(nanos);
  const iso = new Date(Number(seconds) * 1000).toISOString().replace(/\.\d{3}Z$/, "");
  return `${iso}.${String(rest).padStart(9, "0")}Z`;
}

/** The RFC 3339 zero time Go writes for an unset time field (section 5.4). */
export const ZERO_TIME = "0001-01-01T00:00:00Z";

/**
 * Parses an RFC 3339 time with any offset and up to nine fraction digits into
 * nanoseconds since the epoch; the zero time, `null` and `undefined` give
 * undefined (section 5.4).
 *
 * @throws RangeError when the text is not RFC 3339.
 */
export function parseRfc3339(text: string | null | undefined): bigint | undefined {
  if (text === null || text === undefined) return undefined;
  const m = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?([Zz]|[+-]\d{2}:\d{2})$/.exec(text);
  if (m === null) throw new RangeError(`not an RFC 3339 time: ${JSON.stringify(text)}`);
  const [, y, mo, d, h, mi, s, frac, zone] = m;
  const utcMs = Date.UTC(Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(s));
  // Date.UTC maps years 0-99 to 1900-1999; fix the year explicitly.
  const date = new Date(utcMs);
  date.setUTCFullYear(Number(y));
  let offsetMinutes = 0;
  if (zone !== "Z" && zone !== "z") {
    const sign = zone!.startsWith("-") ? -1 : 1;
    offsetMinutes = sign * (Number(zone!.slice(1, 3)) * 60 + Number(zone!.slice(4, 6)));
  }
  const nanos = BigInt(date.getTime() - offsetMinutes * 60_000) * 1_000_000n + BigInt((frac ?? "").padEnd(9, "0") || "0");
  return text === ZERO_TIME || nanos === ZERO_TIME_NANOS ? undefined : nanos;
}

/** Nanoseconds since the epoch of {@link ZERO_TIME}. */
const ZERO_TIME_NANOS = -62_135_596_800n * NANOS_PER_SECOND;

/** RFC 3339 text for optional nanoseconds, {@link ZERO_TIME} when undefined. */
export function formatOptionalNanos(nanos: bigint | undefined): string {
  return nanos === undefined ? ZERO_TIME : formatNanos(nanos);
}
