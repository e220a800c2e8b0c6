import { createRequire } from "node:module";
import { FRAMING_ROOM_BYTES } from "../rpc/encoded-answer.js";
import { sparePayloadMemory } from "../../common/spare-payload-memory.js";

/** Answers framed in place by {@link frameInPlace}, which grpc-js sends as they are. */
const framed = new WeakSet<Buffer>();

/**
 * Writes the gRPC message prefix (flag 0, big-endian length; gRPC over
 * HTTP/2 "Length-Prefixed-Message") into the {@link FRAMING_ROOM_BYTES}
 * bytes before `wire` and answers the framed message, a view of the same
 * memory, which grpc-js then sends with no copy (see
 * {@link sendFramedAnswersAsIs}).
 *
 * @param wire an answer's wire bytes with writable room before them (rpc/encoded-answer.ts `hasFramingRoom`).
 */
export function frameInPlace(wire: Buffer): Buffer {
  const frame = withPrefix(Buffer.from(wire.buffer, wire.byteOffset - FRAMING_ROOM_BYTES, FRAMING_ROOM_BYTES + wire.byteLength));
  framed.add(frame);
  return frame;
}

/** Writes the prefix of an uncompressed message (flag 0, the big-endian length of what follows it) into `frame`'s first bytes; answers `frame`. */
function withPrefix(frame: Buffer): Buffer {
  frame[0] = 0;
  frame.writeUInt32BE(frame.length - FRAMING_ROOM_BYTES, 1);
  return frame;
}

/**
 * An answer's bytes as one gRPC message: an answer framed by
 * {@link frameInPlace} as it is, any other copied behind a new prefix (flag
 * 0, big-endian length), as grpc-js frames it.
 */
export function framedAnswer(bytes: Buffer): Buffer {
  if (framed.has(bytes)) return bytes;
  const frame = Buffer.allocUnsafe(FRAMING_ROOM_BYTES + bytes.length);
  bytes.copy(frame, FRAMING_ROOM_BYTES);
  return withPrefix(frame);
}

/**
 * Gives the memory of a framed answer back to common/spare-payload-memory.ts
 * if it came from there, once HTTP/2 has written it to the socket with the
 * stream still open (see {@link sendFramedAnswersAsIs} for why only then).
 */
export function answerWritten(frame: Buffer): void {
  if (framed.has(frame) && sparePayloadMemory.owns(frame.buffer)) sparePayloadMemory.giveBack(frame.buffer);
}

/** grpc-js's server call class, whose `serializeMessage` frames each answer (an internal of grpc-js 1.14, pinned in package.json). */
interface GrpcServerCall {
  prototype: { serializeMessage(value: unknown): Buffer; sendMessage(message: unknown, callback: () => void): void; checkCancelled(): boolean };
}

/**
 * Makes grpc-js send an answer framed by {@link frameInPlace} as it is;
 * any other answer is framed by grpc-js as before (it allocates the framed
 * message and copies the answer into it: for a 64 MiB Load, a copy into
 * fresh memory on the main thread that held every other call back; issue
 * 11). The memory of a framed answer that came from
 * common/spare-payload-memory.ts is given back there once grpc-js reports
 * the message written with the call still open (its write callback: Node
 * calls it when HTTP/2 has written the bytes to the socket, and grpc-js
 * sends the status only then). Node also calls it, without an error, for a
 * stream already destroyed (the client reset it mid-answer), when part of
 * the answer may still be on its way to the socket: such an answer, or one
 * whose write failed, leaves its memory to the garbage collector.
 * Idempotent.
 *
 * @throws Error when grpc-js no longer has the class or methods (an upgrade moved them): the server refuses to start.
 */
export function sendFramedAnswersAsIs(): void {
  const require = createRequire(import.meta.url);
  const call = (require("@grpc/grpc-js/build/src/server-interceptors.js") as { BaseServerInterceptingCall?: GrpcServerCall }).BaseServerInterceptingCall;
  const serialize = call?.prototype.serializeMessage;
  const send = call?.prototype.sendMessage;
  if (typeof serialize !== "function" || typeof send !== "function" || typeof call?.prototype.checkCancelled !== "function") {
    throw new Error("grpc-js has no BaseServerInterceptingCall.prototype.serializeMessage, sendMessage and checkCancelled to use (grpc-js was upgraded past 1.14?)");
  }
  if ((serialize as { framedAsIs?: true }).framedAsIs) return;
  const asIs = Object.assign(
    function (this: unknown, value: unknown): Buffer {
      return value instanceof Buffer && framed.has(value) ? value : serialize.call(this, value);
    },
    { framedAsIs: true as const },
  );
  call!.prototype.serializeMessage = asIs;
  call!.prototype.sendMessage = function (this: { checkCancelled(): boolean }, message: unknown, callback: () => void): void {
    if (!(message instanceof Buffer) || !framed.has(message)) return send.call(this, message, callback);
    send.call(this, message, () => {
      if (!this.checkCancelled()) answerWritten(message);
      callback();
    });
  };
}
