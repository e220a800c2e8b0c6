/**
 * Parsers of command-line flag values shared by `serve` and the client
 * commands (durations, counts, sizes). Each throws commander's
 * InvalidArgumentError, which commander prints as a usage error (exit 2).
 */
import { InvalidArgumentError } from "commander";
import ms from "ms";
import bytes from "bytes";

/**
 * Parses a duration flag such as `30s`, `500ms` or `2m` into milliseconds.
 *
 * @throws InvalidArgumentError (commander prints it; `serve` exits 2) when the
 *   text is not a positive duration.
 */
export function parseDuration(text: string): number {
  const value = ms(text as ms.StringValue);
  if (typeof value !== "number" || !Number.isFinite(value) || value <= 0) {
    throw new InvalidArgumentError(`expected a positive duration such as 30s, 500ms or 2m, got ${JSON.stringify(text)}`);
  }
  return value;
}

/**
 * A parser of duration flags (see {@link parseDuration}) that refuses
 * durations shorter than `minMs` milliseconds, saying why (`reason`).
 *
 * @throws InvalidArgumentError (from the parser) when the text is not a duration of at least `minMs`.
 */
export function parseDurationAtLeast(minMs: number, reason: string): (text: string) => number {
  return (text) => {
    const value = parseDuration(text);
    if (value < minMs) throw new InvalidArgumentError(`expected at least ${ms(minMs)}: ${reason}; got ${JSON.stringify(text)}`);
    return value;
  };
}

/**
 * Parses a duration flag that may also be `0` (off), in milliseconds.
 *
 * @throws InvalidArgumentError when the text is neither `0` nor a positive duration.
 */
export function parseDurationOrZero(text: string): number {
  return text.trim() === "0" ? 0 : parseDuration(text);
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
