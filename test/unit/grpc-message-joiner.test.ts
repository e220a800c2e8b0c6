import { createRequire } from "node:module";
import { describe, expect, test } from "vitest";
import { joinGrpcMessagesOnArrival, joinOnArrival, SHARED_MESSAGE_BYTES, type JoinerState } from "../../services/server/grpc-message-joiner.js";

type Decoder = { write(data: Buffer): Buffer[] };
type DecoderClass = { new (max: number): Decoder; prototype: Decoder };
const { StreamDecoder } = createRequire(import.meta.url)("@grpc/grpc-js/build/src/stream-decoder.js") as { StreamDecoder: DecoderClass };
/** grpc-js's own decoder, kept before any test installs ours: the reference the joiner must agree with. */
const grpcWrite = StreamDecoder.prototype.write;

/** A fresh decoder state for {@link joinOnArrival} (what grpc-js's constructor leaves). */
const joiner = (max = -1) => {
  const state = { maxReadMessageLength: max };
  return (data: Buffer) => joinOnArrival.call(state, data);
};
const reference = (max = -1) => {
  const d = new StreamDecoder(max);
  return (data: Buffer) => grpcWrite.call(d, data);
};

/** A gRPC length-prefixed message holding `body`. */
function framed(body: Buffer): Buffer {
  const prefix = Buffer.alloc(5);
  prefix.writeUInt32BE(body.length, 1);
  return Buffer.concat([prefix, body]);
}

/** Deterministic pseudo-random numbers (a fixed LCG), so a failure repeats. */
function lcg(seed: number): () => number {
  let x = seed;
  return () => ((x = (x * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
}

/** Messages as text, so that comparing them is quick (vitest compares Buffers byte by byte). */
const shown = (messages: Buffer[]) => messages.map((m) => m.toString("base64"));

/** `bytes` cut at the given offsets. */
const cut = (bytes: Buffer, at: number[]) => [0, ...at, bytes.length].slice(1).map((end, i, ends) => bytes.subarray(i === 0 ? 0 : ends[i - 1], end));

describe("grpc-message-joiner (issue 11: a large message is joined as it arrives)", () => {
  const stream = Buffer.concat([framed(Buffer.from("first")), framed(Buffer.alloc(0)), framed(Buffer.alloc(70_000, 7)), framed(Buffer.from("last"))]);

  test("answers what grpc-js's decoder answers for every cut of a stream into two frames", () => {
    for (let at = 0; at <= stream.length; at += at < 40 ? 1 : 997) {
      const ours = joiner();
      const theirs = reference();
      const frames = cut(stream, [at]);
      expect(frames.map((f) => shown(ours(f)))).toEqual(frames.map((f) => shown(theirs(f))));
    }
  });

  test("answers what grpc-js's decoder answers for random frame sizes, 1 byte to 64 KiB", () => {
    const random = lcg(11);
    for (let run = 0; run < 50; run++) {
      const at: number[] = [];
      for (let p = Math.floor(random() * 8); p < stream.length; p += 1 + Math.floor(random() * (run % 2 === 0 ? 16 : 65_536))) at.push(p);
      const ours = joiner();
      const theirs = reference();
      const frames = cut(stream, at);
      const mine = frames.flatMap((f) => ours(f));
      expect(shown(mine)).toEqual(shown(frames.flatMap((f) => theirs(f))));
      expect(mine.map((m) => m.length)).toEqual([10, 5, 70_005, 9]);
    }
  });

  test("a prefix announcing more than the limit fails as grpc-js's does, whole or split", () => {
    const big = framed(Buffer.alloc(101));
    expect(() => joiner(100)(big)).toThrow("Received message larger than max (101 vs 100)");
    expect(() => reference(100)(big)).toThrow("Received message larger than max (101 vs 100)");
    const split = joiner(100);
    expect(split(big.subarray(0, 3))).toEqual([]);
    expect(() => split(big.subarray(3))).toThrow("Received message larger than max (101 vs 100)");
    expect(joiner(101)(big)).toEqual([big]);
  });

  test(`a message of ${SHARED_MESSAGE_BYTES} bytes or more is joined into shared memory, a smaller one is not`, () => {
    const [large] = joiner()(framed(Buffer.alloc(SHARED_MESSAGE_BYTES, 3)));
    const [small] = joiner()(framed(Buffer.alloc(SHARED_MESSAGE_BYTES - 1, 3)));
    expect(large!.buffer).toBeInstanceOf(SharedArrayBuffer);
    expect(large!.subarray(5).every((b) => b === 3)).toBe(true);
    expect(small!.buffer).not.toBeInstanceOf(SharedArrayBuffer);
  });

  test("a message the prefix's frame does not complete is allocated only when more of its body arrives (the budget admits it first)", () => {
    const state: JoinerState = { maxReadMessageLength: -1 };
    const write = (data: Buffer) => joinOnArrival.call(state, data);
    const message = framed(Buffer.alloc(64 * 1024 * 1024, 9));
    // The prefix split over two frames, then 16 KiB of body: nothing of 64 MiB is reserved yet.
    expect(write(message.subarray(0, 2))).toEqual([]);
    expect(write(message.subarray(2, 5 + 16 * 1024))).toEqual([]);
    expect(state.joining).toBeUndefined();
    expect(state.held?.length).toBe(5 + 16 * 1024);
    expect(write(message.subarray(5 + 16 * 1024, 5 + 32 * 1024))).toEqual([]);
    expect(state.joining?.length).toBe(message.length);
    expect(state.held).toBeUndefined();
    const [whole] = write(message.subarray(5 + 32 * 1024));
    expect(whole!.equals(message)).toBe(true);
    // A message its prefix's frame completes is answered from that frame, with nothing held.
    expect(shown(write(framed(Buffer.from("small"))))).toEqual(shown([framed(Buffer.from("small"))]));
    expect(state.held).toBeUndefined();
  });

  test("an unfinished message is not answered, and the next call starts clean", () => {
    const write = joiner();
    const msg = framed(Buffer.from("abcdef"));
    expect(write(msg.subarray(0, 8))).toEqual([]);
    expect(write(msg.subarray(8))).toEqual([msg]);
  });

  test("installing it makes grpc-js's decoder class use it", () => {
    joinGrpcMessagesOnArrival();
    expect(StreamDecoder.prototype.write).toBe(joinOnArrival);
    const msg = framed(Buffer.from("x"));
    expect(new StreamDecoder(-1).write(msg)).toEqual([msg]);
  });
});
