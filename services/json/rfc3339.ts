/**
 * RFC 3339 timestamps as integer nanoseconds since the Unix epoch (bigint),
 * the way schedule JSON carries them (wire-contract.md section 5.4; docs/DESIGN.md
 * "Schedule store"). JavaScript `Date` would drop the nanoseconds, so neither
 * direction goes through it.
 */

const NANOS_PER_SECOND = 1_000_000_000n;
const SECONDS_PER_DAY = 86_400n;

/** Days from 1970-01-01 to the given proleptic Gregorian date (month 1-12). */
function daysFromCivil(year: number, month: number, day: number): number {
  const y = month <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yearOfEra = y - era * 400;
  const dayOfYear = Math.floor((153 * (month + (month > 2 ? -3 : 9)) + 2) / 5) + day - 1;
  const dayOfEra = yearOfEra * 365 + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100) + dayOfYear;
  return era * 146_097 + dayOfEra - 719_468;
}

/** The proleptic Gregorian date `days` after 1970-01-01, as [year, month 1-12, day]. */
function civilFromDays(days: number): [number, number, number] {
  const z = days + 719_468;
  const era = Math.floor(z / 146_097);
  const dayOfEra = z - era * 146_097;
  const yearOfEra = Math.floor((dayOfEra - Math.floor(dayOfEra / 1460) + Math.floor(dayOfEra / 36_524) - Math.floor(dayOfEra / 146_096)) / 365);
  const dayOfYear = dayOfEra - (365 * yearOfEra + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100));
  const mp = Math.floor((5 * dayOfYear + 2) / 153);
  const day = dayOfYear - Math.floor((153 * mp + 2) / 5) + 1;
  const month = mp < 10 ? mp + 3 : mp - 9;
  return [month <= 2 ? yearOfEra + era * 400 + 1 : yearOfEra + era * 400, month, day];
}

function daysInMonth(year: number, month: number): number {
  if (month === 2) return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28;
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}

/** Floor division for bigints (rounds toward negative infinity). */
export function floorDiv(a: bigint, b: bigint): bigint {
  const q = a / b;
  return (a % b !== 0n && (a < 0n) !== (b < 0n)) ? q - 1n : q;
}

/** 0000-01-01T00:00:00Z, the earliest instant RFC 3339 text can name in UTC. */
export const MIN_TIME_NANOS = BigInt(daysFromCivil(0, 1, 1)) * SECONDS_PER_DAY * NANOS_PER_SECOND;

/** 9999-12-31T23:59:59.999999999Z, the latest instant RFC 3339 text can name in UTC. */
export const MAX_TIME_NANOS = BigInt(daysFromCivil(10_000, 1, 1)) * SECONDS_PER_DAY * NANOS_PER_SECOND - 1n;

/**
 * Go's zero `time.Time`, `0001-01-01T00:00:00Z`, in nanoseconds since the Unix
 * epoch: the "unset" value of every schedule time field (section 5.4).
 */
export const ZERO_TIME_NANOS = BigInt(daysFromCivil(1, 1, 1)) * SECONDS_PER_DAY * NANOS_PER_SECOND;

/** A time string that is not RFC 3339 as accepted here; the message says why. */
export class TimeFormatError extends Error {
  override name = "TimeFormatError";
}

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(Z|[+-]\d{2}:\d{2})$/;

/**
 * Parses an RFC 3339 date-time with any zone offset and up to nine fraction
 * digits into nanoseconds since the Unix epoch.
 *
 * Accepted as Go's `time.Time` JSON decoding accepts it: upper-case `T` and
 * `Z`, a real calendar date, hours 00-23, minutes and seconds 00-59 (no leap
 * second), offsets up to ±23:59. Deliberately stricter than Go in two ways:
 * more than nine fraction digits are refused (Go silently truncates them), and
 * so is an instant that falls outside years 0000-9999 in UTC (it could not be
 * written back as RFC 3339 UTC text).
 *
 * @throws TimeFormatError saying what is wrong.
 */
export function parseRfc3339(text: string): bigint {
  const m = RFC3339.exec(text);
  if (m === null) throw new TimeFormatError(`${JSON.stringify(text)} is not an RFC 3339 date-time`);
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const fraction = m[7];
  const zone = m[8]!;
  if (month < 1 || month > 12) throw new TimeFormatError(`${JSON.stringify(text)}: month out of range`);
  if (day < 1 || day > daysInMonth(year, month)) throw new TimeFormatError(`${JSON.stringify(text)}: day out of range`);
  if (hour > 23 || minute > 59 || second > 59) throw new TimeFormatError(`${JSON.stringify(text)}: time of day out of range`);
  if (fraction !== undefined && fraction.length > 9) throw new TimeFormatError(`${JSON.stringify(text)}: more than nine fraction digits`);
  let offsetSeconds = 0;
  if (zone !== "Z") {
    const oh = Number(zone.slice(1, 3));
    const om = Number(zone.slice(4, 6));
    if (oh > 23 || om > 59) throw new TimeFormatError(`${JSON.stringify(text)}: zone offset out of range`);
    offsetSeconds = (zone[0] === "-" ? -1 : 1) * (oh * 3600 + om * 60);
  }
  const seconds = BigInt(daysFromCivil(year, month, day)) * SECONDS_PER_DAY + BigInt(hour * 3600 + minute * 60 + second - offsetSeconds);
  const nanos = seconds * NANOS_PER_SECOND + (fraction === undefined ? 0n : BigInt(fraction.padEnd(9, "0")));
  if (nanos < MIN_TIME_NANOS || nanos > MAX_TIME_NANOS) throw new TimeFormatError(`${JSON.stringify(text)}: outside years 0000-9999 in UTC`);
  return nanos;
}

function pad(n: number, width: number): string {
  return String(n).padStart(width, "0");
}

/**
 * Writes nanoseconds since the Unix epoch as RFC 3339 in UTC with up to nine
 * fraction digits, trailing zeros trimmed (Go's RFC3339Nano layout), e.g.
 * `2023-11-14T22:13:20.5Z`; the zero time comes out as `0001-01-01T00:00:00Z`.
 *
 * @throws RangeError for an instant outside years 0000-9999 (never produced by
 *   {@link parseRfc3339} or a validated request Timestamp).
 */
export function formatRfc3339(nanos: bigint): string {
  if (nanos < MIN_TIME_NANOS || nanos > MAX_TIME_NANOS) throw new RangeError(`instant ${nanos} ns is outside years 0000-9999`);
  const seconds = floorDiv(nanos, NANOS_PER_SECOND);
  const fraction = nanos - seconds * NANOS_PER_SECOND;
  const days = floorDiv(seconds, SECONDS_PER_DAY);
  const secondOfDay = Number(seconds - days * SECONDS_PER_DAY);
  const [year, month, day] = civilFromDays(Number(days));
  const clock = `${pad(Math.floor(secondOfDay / 3600), 2)}:${pad(Math.floor(secondOfDay / 60) % 60, 2)}:${pad(secondOfDay % 60, 2)}`;
  const frac = fraction === 0n ? "" : `.${fraction.toString().padStart(9, "0").replace(/0+$/, "")}`;
  return `${pad(year, 4)}-${pad(month, 2)}-${pad(day, 2)}T${clock}${frac}Z`;
}
