import { PAYLOAD_HEADROOM_BYTES } from "../../common/payload-headroom.js";

/**
 * Bytes from which a Uint8Array in an answer of the SQLite workers is moved
 * to the main thread instead of copied (64 KiB; a smaller copy costs less
 * than the bookkeeping).
 */
export const TRANSFER_BYTES = 64 * 1024;

/**
 * The memory to move with `value` through `postMessage` (issue 11): the
 * ArrayBuffer of every Uint8Array of at least {@link TRANSFER_BYTES} found in
 * `value`, its arrays and its plain objects (six levels deep), when the array
 * is the whole of its ArrayBuffer, or all of it but the headroom of a payload
 * read for a Load (common/payload-headroom.ts: at most
 * {@link PAYLOAD_HEADROOM_BYTES} before the array, none after). A moved
 * buffer is empty on the sending side afterwards, so only a sender that is
 * done with `value` may use this (the workers, for their answers). A view
 * into a larger buffer is left to the structured clone, which copies that
 * whole buffer.
 */
export function transferables(value: unknown, found: ArrayBuffer[] = [], depth = 0): ArrayBuffer[] {
  if (value instanceof Uint8Array) {
    const whole = value.byteOffset <= PAYLOAD_HEADROOM_BYTES && value.byteOffset + value.byteLength === value.buffer.byteLength;
    if (value.byteLength >= TRANSFER_BYTES && whole && value.buffer instanceof ArrayBuffer && !found.includes(value.buffer)) {
      found.push(value.buffer);
    }
  } else if (depth < 6 && typeof value === "object" && value !== null) {
    for (const v of Array.isArray(value) ? value : Object.values(value)) transferables(v, found, depth + 1);
  }
  return found;
}
