/**
 * Parsers of command-line flag values shared by `serve` and the client
 * commands (durations, counts, sizes). Each throws commander's
 * InvalidArgumentError, which commander prints as a usage error (exit 2).
 */
import { InvalidArgumentError } from "commander";
import ms from "ms";
import bytes from "bytes";

/**
 * Longest duration a timer flag may ask for, in milliseconds: 2^31 − 1 (about
 * 24.8 days). Node.js timers cannot wait longer: a longer delay fires after
 * 1 ms, with only a warning, so `--store-timeout 30d` would time every
 * operation out at once.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * A duration such as `30s`, `500ms` or `2m` in milliseconds (`ms`), or
 * undefined when the text is none: empty, a number without a unit (`5`
 * would read as 5 ms, seldom what was meant), or anything `ms` cannot read.
 */
function readDuration(text: string): number | undefined {
  if (/^\s*[+-]?[0-9.]*\s*$/.test(text)) return undefined;
  let value: number | undefined;
  try {
    value = ms(text as ms.StringValue);
  } catch {
    // ms throws on an empty or over-long string
  }
  return typeof value === "number" && Number.isFinite(value) ? value : undefined;
}

/** A positive duration in milliseconds, without an upper bound. @throws InvalidArgumentError when the text is not one. */
function durationMs(text: string): number {
  const value = readDuration(text);
  if (value === undefined || value <= 0) {
    throw new InvalidArgumentError(`expected a positive duration with its unit, such as 30s, 500ms or 2m, got ${JSON.stringify(text)}`);
  }
  return value;
}

/** `value` (milliseconds, parsed from `text`) when it is at most `maxMs`. @throws InvalidArgumentError naming the bound otherwise. */
function atMost(value: number, maxMs: number, text: string): number {
  if (value <= maxMs) return value;
  const why = maxMs === MAX_TIMER_MS ? " (2^31 - 1 ms, about 24.8 days: the longest a Node.js timer waits)" : "";
  throw new InvalidArgumentError(`expected at most ${ms(Math.floor(maxMs / 86_400_000) * 86_400_000)}${why}, got ${JSON.stringify(text)}`);
}

/**
 * Parses a duration flag such as `30s`, `500ms` or `2m` into milliseconds:
 * at most {@link MAX_TIMER_MS}, since the server and the clients wait on
 * every such duration with a timer.
 *
 * @throws InvalidArgumentError (commander prints it; `serve` exits 2) when the
 *   text is not a positive duration, or one longer than a timer can wait.
 */
export function parseDuration(text: string): number {
  return atMost(durationMs(text), MAX_TIMER_MS, text);
}

/**
 * A parser of duration flags (see {@link parseDuration}) that refuses
 * durations shorter than `minMs` milliseconds, saying why (`reason`), and
 * longer than `maxMs` (default {@link MAX_TIMER_MS}; a flag that no timer
 * waits on, such as `--lease-ttl`, passes its own bound).
 *
 * @throws InvalidArgumentError (from the parser) when the text is not a duration from `minMs` to `maxMs`.
 */
export function parseDurationAtLeast(minMs: number, reason: string, maxMs = MAX_TIMER_MS): (text: string) => number {
  return (text) => {
    const value = durationMs(text);
    if (value < minMs) throw new InvalidArgumentError(`expected at least ${ms(minMs)}: ${reason}; got ${JSON.stringify(text)}`);
    return atMost(value, maxMs, text);
  };
}

/**
 * Parses a duration flag that may also be zero (off: `0`, `0s`, `0ms`), in milliseconds.
 *
 * @throws InvalidArgumentError when the text is neither zero nor a positive duration.
 */
export function parseDurationOrZero(text: string): number {
  const value = text.trim() === "0" ? 0 : readDuration(text);
  if (value === 0) return 0;
  if (value === undefined || value < 0) throw new InvalidArgumentError(`expected 0 (off) or a positive duration with its unit, such as 30s, 500ms or 2m, got ${JSON.stringify(text)}`);
  return atMost(value, MAX_TIMER_MS, text);
}

/**
 * Parses a positive integer flag.
 *
 * @throws InvalidArgumentError when the text is not a whole number ≥ 1.
 */
export function parsePositiveInt(text: string): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError(`expected a whole number of at least 1, got ${JSON.stringify(text)}`);
  return n;
}

/**
 * Parses a size flag such as `512MB`, `2GB` or `1048576` (bytes; units are
 * powers of 1024, as the `bytes` package reads them).
 *
 * @throws InvalidArgumentError when the text is not a size of at least 1 byte.
 */
export function parseBytes(text: string): number {
  // bytes.parse reads "12zz" as 12; accept only a number with an optional known unit.
  const value = /^\s*\d+(\.\d+)?\s*(b|kb|mb|gb|tb|pb)?\s*$/i.test(text) ? bytes.parse(text) : null;
  if (value === null || !Number.isSafeInteger(value) || value < 1) throw new InvalidArgumentError(`expected a size such as 512MB, 2GB or a number of bytes, got ${JSON.stringify(text)}`);
  return value;
}
