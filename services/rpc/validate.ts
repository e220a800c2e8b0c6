import { invalidArgument } from "./errors.js";
import { idProblem, MAX_ID_BYTES } from "../../common/id-rules.js";

export { MAX_ID_BYTES };

/**
 * Checks an id or key field: non-blank (wire-contract.md sections 2.5, 3.4,
 * 4.3, 5.5) and at most `maxBytes` UTF-8 bytes.
 *
 * @throws ConnectError INVALID_ARGUMENT naming `field`.
 * @returns the value unchanged.
 */
export function requireId(field: string, value: string, maxBytes = MAX_ID_BYTES): string {
  const problem = idProblem(value, maxBytes);
  if (problem !== undefined) throw invalidArgument(field, problem);
  return value;
}

/**
 * Requires a string field to contain at least one non-whitespace character.
 * Throws INVALID_ARGUMENT naming `field` otherwise (wire-contract.md sections
 * 2.5, 3.4, 4.3 and 5.5 all reject blank ids).
 *
 * @returns the value unchanged, for chaining.
 */
export function requireNonBlank(field: string, value: string): string {
  if (value.trim().length === 0) throw invalidArgument(field, "is required and must not be blank");
  return value;
}

/**
 * Requires a message-typed field to be present. Throws INVALID_ARGUMENT naming
 * `field` when it is unset.
 */
export function requirePresent<T>(field: string, value: T | undefined): T {
  if (value === undefined) throw invalidArgument(field, "is required");
  return value;
}

/**
 * Requires a bytes field to hold at least one byte. Throws INVALID_ARGUMENT
 * naming `field` when it is empty.
 */
export function requireNonEmptyBytes(field: string, value: Uint8Array): Uint8Array {
  if (value.length === 0) throw invalidArgument(field, "must not be empty");
  return value;
}

/**
 * Requires a format tag to be one of `allowed`. Throws INVALID_ARGUMENT naming
 * `field` and the tag that was sent otherwise.
 */
export function requireFormat(field: string, value: string, allowed: readonly string[]): string {
  if (!allowed.includes(value)) {
    throw invalidArgument(field, `unknown format ${JSON.stringify(value)}; expected ${allowed.map((a) => JSON.stringify(a)).join(" or ")}`);
  }
  return value;
}
