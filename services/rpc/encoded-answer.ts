import { create, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { WireType } from "@bufbuild/protobuf/wire";
import { WireWriter } from "./wire-writer.js";

/** Bytes of one chunk of {@link AnswerBytes}. */
const CHUNK_BYTES = 1024 * 1024;

/**
 * The wire bytes of an answer being built, in chunks of 1 MiB, so that an
 * answer of N bytes holds about N bytes however many entries it has (issue
 * 10: a protobuf-es object per entry took ~1.2 KB of server memory for an
 * entry of ~40 encoded bytes; bench/RESULTS.md "Bounded answers").
 */
export class AnswerBytes {
  private readonly chunks: Buffer[] = [];
  private current = Buffer.allocUnsafe(CHUNK_BYTES);
  private at = 0;
  private total = 0;

  /** Bytes written so far. */
  get length(): number {
    return this.total;
  }

  /** Appends `n` (0 ≤ n < 2^53) as a base-128 varint. */
  varint(n: number): void {
    for (; n >= 128; n = Math.floor(n / 128)) this.byte((n % 128) | 128);
    this.byte(n);
  }

  /** Appends a copy of `bytes`. */
  write(bytes: Uint8Array): void {
    let from = 0;
    while (from < bytes.length) {
      if (this.at === this.current.length) this.nextChunk();
      const n = Math.min(bytes.length - from, this.current.length - this.at);
      this.current.set(bytes.subarray(from, from + n), this.at);
      this.at += n;
      from += n;
    }
    this.total += bytes.length;
  }

  private byte(b: number): void {
    if (this.at === this.current.length) this.nextChunk();
    this.current[this.at++] = b;
    this.total++;
  }

  private nextChunk(): void {
    this.chunks.push(this.current);
    this.current = Buffer.allocUnsafe(CHUNK_BYTES);
    this.at = 0;
  }

  /** The bytes written, as one buffer; each chunk is let go as soon as it is copied. */
  finish(): Buffer {
    const out = Buffer.allocUnsafe(this.total);
    let at = 0;
    this.chunks.push(this.current.subarray(0, this.at));
    for (let i = 0; i < this.chunks.length; i++) {
      at += this.chunks[i]!.copy(out, at);
      this.chunks[i] = EMPTY;
    }
    this.chunks.length = 0;
    this.current = EMPTY;
    return out;
  }
}

const EMPTY = Buffer.alloc(0);

/** The wire bytes of messages made by {@link encodedAnswer}, by message. */
const encodings = new WeakMap<object, Buffer>();

/**
 * A message of type `desc` that encodes to exactly `bytes`, the wire bytes
 * of its one repeated field numbered `fieldNo` (below 16, so its tag is one
 * byte), as protobuf-es would have encoded them from the entries.
 *
 * protobuf-es writes a message's unknown fields after its known ones, each
 * as its tag followed by its raw data. So a message whose known fields are
 * all empty, with one unknown field `fieldNo` (length-delimited) whose data
 * is `bytes` after their first tag, encodes to `bytes`: that is how the
 * Connect listener sends it. The gRPC adapter sends `bytes` as they are
 * ({@link preEncoded}). A client decodes the usual repeated field.
 *
 * @param bytes the field's entries, each as tag, length and entry; empty for no entries.
 */
export function encodedAnswer<Desc extends DescMessage>(desc: Desc, fieldNo: number, bytes: Buffer): MessageShape<Desc> {
  const message = create(desc);
  if (bytes.length === 0) return message;
  message.$unknown = [{ no: fieldNo, wireType: WireType.LengthDelimited, data: bytes.subarray(1) }];
  encodings.set(message, bytes);
  return message;
}

/**
 * A message of type `desc` whose only field set is string field `fieldNo`
 * (below 16), holding `value`: wire bytes written by {@link WireWriter}
 * and registered as {@link encodedAnswer} does, for small answers on hot
 * paths (an Append's cursor: issue 11). An empty `value` is the empty message.
 */
export function stringAnswer<Desc extends DescMessage>(desc: Desc, fieldNo: number, value: string): MessageShape<Desc> {
  const utf8Bytes = Buffer.byteLength(value, "utf8");
  const w = new WireWriter(WireWriter.stringFieldBytes(utf8Bytes));
  w.string(fieldNo, value, utf8Bytes);
  return encodedAnswer(desc, fieldNo, w.finish());
}

/** The wire bytes of a message made by {@link encodedAnswer}, or `undefined` for any other. */
export function preEncoded(message: unknown): Buffer | undefined {
  return typeof message === "object" && message !== null ? encodings.get(message) : undefined;
}

/** Bytes free before the wire bytes of a message made by {@link encodedInPlace}: room for the gRPC message prefix (a flag byte and a 4-byte length). */
export const FRAMING_ROOM_BYTES = 5;

/** Wire bytes registered by {@link encodedInPlace}, which have {@link FRAMING_ROOM_BYTES} writable bytes before them. */
const roomy = new WeakSet<Buffer>();

/**
 * Registers `bytes` as the wire bytes of `message` (a complete message, with
 * its fields set: the Connect listener encodes it as usual), with
 * {@link FRAMING_ROOM_BYTES} bytes before them in their buffer that the
 * transport may overwrite: the gRPC adapter writes its message prefix there
 * and sends the whole as it lies, with no copy (issue 11; see
 * session-store/load-answer.ts).
 *
 * @param bytes the message's wire bytes, at offset ≥ {@link FRAMING_ROOM_BYTES} of their buffer.
 * @throws RangeError when `bytes` has less room before it.
 */
export function encodedInPlace<T extends object>(message: T, bytes: Buffer): T {
  if (bytes.byteOffset < FRAMING_ROOM_BYTES) throw new RangeError(`encoded answer at offset ${bytes.byteOffset} has no room for its framing (${FRAMING_ROOM_BYTES} bytes)`);
  encodings.set(message, bytes);
  roomy.add(bytes);
  return message;
}

/** Whether `bytes` (from {@link preEncoded}) has {@link FRAMING_ROOM_BYTES} writable bytes before it. */
export function hasFramingRoom(bytes: Buffer): boolean {
  return roomy.has(bytes);
}
