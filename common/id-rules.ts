/** Longest accepted id (session id, schedule name, fire id, deletion id), in UTF-8 bytes (docs/DESIGN.md principle 5). */
export const MAX_ID_BYTES = 16 * 1024;

/**
 * What is wrong with an id or key, in the words the services use after the
 * field name: blank (wire-contract.md sections 2.5, 3.4, 4.3, 5.5 all reject
 * blank ids) or longer than `maxBytes` UTF-8 bytes. Shared by the services'
 * validation and the CLI, which checks every id of a command before it sends
 * any.
 *
 * @returns undefined for an id the services accept.
 */
export function idProblem(value: string, maxBytes = MAX_ID_BYTES): string | undefined {
  if (value.trim().length === 0) return "is required and must not be blank";
  if (Buffer.byteLength(value, "utf8") > maxBytes) return `longer than ${maxBytes} bytes`;
  return undefined;
}
