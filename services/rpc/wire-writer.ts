/**
 * A protobuf wire writer for small answers whose size is known before they
 * are written (a Lease, an Append's cursor): the caller adds up the field
 * sizes with the static helpers, then writes the fields in field-number
 * order into one buffer of exactly that size. It writes what protobuf-es's
 * `toBinary` writes for the same message (proto3: a field at its default
 * value, 0 or "", is left out; test/rpc/wire-writer.test.ts compares the
 * two byte for byte), without `toBinary`'s per-call reflection objects and
 * byte arrays: about 9 KB of garbage per Renew answer, and the collector
 * threads' time that goes with it (issue 11, bench/RESULTS.md).
 *
 * Field numbers must be below 16 (a one-byte tag), as in every message this
 * writer is used for.
 */
export class WireWriter {
  private readonly bytes: Buffer;
  private at = 0;

  /** @param size the message's exact encoded size in bytes (from the static helpers). */
  constructor(size: number) {
    this.bytes = Buffer.allocUnsafe(size);
  }

  /** Bytes of a base-128 varint holding `n` (0 ≤ n < 2^64; a number up to 2^53 or a bigint). */
  static varintBytes(n: number | bigint): number {
    let bytes = 1;
    if (typeof n === "number" && n < 2 ** 31) {
      for (; n >= 128; n >>>= 7) bytes++;
      return bytes;
    }
    let v = BigInt(n);
    while (v >= 128n) {
      v >>= 7n;
      bytes++;
    }
    return bytes;
  }

  /** Bytes of a string field holding `utf8Bytes` bytes of UTF-8: none for an empty string. */
  static stringFieldBytes(utf8Bytes: number): number {
    return utf8Bytes === 0 ? 0 : WireWriter.delimitedFieldBytes(utf8Bytes);
  }

  /** Bytes of a length-delimited field (tag, length, `contentBytes` of content), written even when empty (a set message field). */
  static delimitedFieldBytes(contentBytes: number): number {
    return 1 + WireWriter.varintBytes(contentBytes) + contentBytes;
  }

  /** Bytes of a varint field holding `n` (uint64 or a non-negative int64/int32): none for 0. */
  static varintFieldBytes(n: number | bigint): number {
    return n === 0 || n === 0n ? 0 : 1 + WireWriter.varintBytes(n);
  }

  /** Writes string field `no` holding `value` (`utf8Bytes` long in UTF-8); nothing for an empty string. */
  string(no: number, value: string, utf8Bytes: number): void {
    if (utf8Bytes === 0) return;
    this.delimited(no, utf8Bytes);
    this.at += this.bytes.write(value, this.at, utf8Bytes, "utf8");
  }

  /** Writes the tag and length of length-delimited field `no` whose `contentBytes` of content the caller writes next. */
  delimited(no: number, contentBytes: number): void {
    this.bytes[this.at++] = (no << 3) | 2;
    this.varint(contentBytes);
  }

  /** Writes varint field `no` holding `n` (0 ≤ n < 2^64); nothing for 0. */
  varintField(no: number, n: number | bigint): void {
    if (n === 0 || n === 0n) return;
    this.bytes[this.at++] = no << 3;
    this.varint(n);
  }

  private varint(n: number | bigint): void {
    if (typeof n === "number" && n < 2 ** 31) {
      for (; n >= 128; n >>>= 7) this.bytes[this.at++] = (n & 127) | 128;
      this.bytes[this.at++] = n;
      return;
    }
    let v = BigInt(n);
    for (; v >= 128n; v >>= 7n) this.bytes[this.at++] = Number(v & 127n) | 128;
    this.bytes[this.at++] = Number(v);
  }

  /**
   * The message's bytes.
   *
   * @throws RangeError when fewer or more bytes were written than the size given to the constructor (a size computed wrong).
   */
  finish(): Buffer {
    if (this.at !== this.bytes.length) throw new RangeError(`wire writer: ${this.at} bytes written into a message sized ${this.bytes.length}`);
    return this.bytes;
  }
}
