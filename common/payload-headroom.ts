/**
 * Bytes a store leaves free before a large payload it reads (64), so that
 * the Load answer can be framed around the payload where it lies instead of
 * being copied into a new buffer (issue 11, "large reads never block the
 * event loop"): the gRPC message prefix (5 bytes) and the LoadResponse and
 * SessionSnapshot field headers (session_store.proto; 12 bytes and the
 * format's) fit for any format of up to 47 bytes. A store that leaves it
 * says so in `StoredSnapshot.headroom`; the bytes there are the reader's to
 * overwrite.
 */
export const PAYLOAD_HEADROOM_BYTES = 64;

/**
 * A buffer of `size` bytes with {@link PAYLOAD_HEADROOM_BYTES} free before
 * it, in an ArrayBuffer of its own that it fills to the end: a worker thread
 * that fills it moves it to the main thread whole, headroom included
 * (storage/sqlite-transfer.ts), with no copy.
 *
 * @param size the payload's length in bytes.
 * @returns a view of `size` bytes at offset {@link PAYLOAD_HEADROOM_BYTES} of its buffer (its content is not initialised).
 */
export function withHeadroom(size: number): Buffer {
  return Buffer.allocUnsafeSlow(PAYLOAD_HEADROOM_BYTES + size).subarray(PAYLOAD_HEADROOM_BYTES);
}
