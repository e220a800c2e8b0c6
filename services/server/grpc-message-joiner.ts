import { createRequire } from "node:module";
import { spareRequestMemory } from "../../common/spare-payload-memory.js";

/** Bytes of a gRPC message prefix: the compressed flag and a 4-byte big-endian length (gRPC over HTTP/2, "Length-Prefixed-Message"). */
const PREFIX_BYTES = 5;

/**
 * Messages of at least this many bytes (1 MiB) are joined into
 * SharedArrayBuffer memory, which worker threads read without a copy: the
 * payload of a large Save reaches the projection worker
 * (session-store/projection-thread.ts) and the SQLite writer
 * (session-store/sqlite.ts staging) as views of the request, where each
 * would otherwise copy it, on the main thread, into memory of its own.
 * Smaller messages use ordinary (pooled) Buffer memory.
 */
export const SHARED_MESSAGE_BYTES = 1024 * 1024;

/** The state grpc-js's `StreamDecoder` keeps per call, replaced by ours (the constructor's `maxReadMessageLength` is kept). */
export interface JoinerState {
  /** The largest message accepted, in bytes, or -1 for no limit (set by grpc-js's constructor). */
  maxReadMessageLength: number;
  /** The message being filled (prefix included), once its prefix is whole and more of its body came after the frame that completed the prefix. */
  joining?: Buffer;
  /**
   * The prefix and the body bytes that came with it, copied, while the
   * message is not yet allocated: at most one DATA frame's bytes (16 KiB at
   * HTTP/2's default frame size).
   */
  held?: Buffer;
  /** Bytes of `joining` filled so far. */
  filled?: number;
  /** The prefix as it arrives, when it comes split across frames. */
  prefix?: Buffer;
  /** Bytes of `prefix` received so far. */
  prefixHave?: number;
}

/**
 * The `write` method of grpc-js's per-call message decoder, rewritten to
 * copy each HTTP/2 DATA frame into the message as the frame arrives: the
 * message buffer (prefix and body) is allocated once its 5-byte prefix has
 * come, from the length the prefix gives. grpc-js 1.14 instead keeps every
 * frame and joins them in one `Buffer.concat` when the last byte arrives;
 * for a 64 MiB Save that one call copied 64 MiB into freshly mapped memory
 * on the main thread, 60–210 ms during which no other call was answered
 * (issue 11, "big snapshots that don't stall small calls"; CPU profile in
 * bench/RESULTS.md). The copying is the same in total, spread over the
 * arrival. Messages of {@link SHARED_MESSAGE_BYTES} or more are joined in
 * SharedArrayBuffer memory (see there), memory used by an earlier large
 * request when the session store has given it back
 * (common/spare-payload-memory.ts `spareRequestMemory`).
 *
 * Memory: a message the frame that completes its prefix also completes is
 * allocated at once. A longer one is allocated, whole, when the next frame
 * of its body arrives; until then the prefix and the body bytes that came
 * with it are kept in a copy of their own ({@link JoinerState.held}, at
 * most one frame). The request watch (grpc-request-watch.ts), which sees
 * each frame first, charges the message to the in-flight budget from the
 * same prefix and, when it does not fit, pauses the stream, so that no
 * further frame arrives until the budget has admitted the message (or the
 * call is refused RESOURCE_EXHAUSTED after 2 s). So memory for a large
 * message, address space included, is reserved only once the budget holds
 * it: a client that announces 65 MiB messages on many streams and sends
 * nothing more costs the server one frame per stream, where an earlier
 * version reserved 65 MiB for each (a fresh-eyes run: 1,000 such streams,
 * about 80 GB of address space; test/transport/inflight-budget.test.ts).
 *
 * Answers what grpc-js's decoder answers: the messages completed by `data`,
 * each with its 5-byte prefix; throws `Error("Received message larger than
 * max (N vs M)")` for a length over the limit, which grpc-js turns into
 * RESOURCE_EXHAUSTED (test/transport/grpc-message-joiner.test.ts).
 *
 * @param data one DATA frame's bytes, of any length, at any message boundary.
 * @returns the framed messages `data` completed, in order (often none).
 * @throws Error when a prefix announces more than `maxReadMessageLength` bytes.
 */
export function joinOnArrival(this: JoinerState, data: Buffer): Buffer[] {
  const done: Buffer[] = [];
  let at = 0;
  while (at < data.length) {
    if (this.joining === undefined && this.held !== undefined) {
      // More of a held message's body: the budget has admitted it (see Memory above).
      this.joining = allocateMessage(this.held.readUInt32BE(1));
      this.filled = this.held.copy(this.joining);
      this.held = undefined;
    }
    if (this.joining === undefined) {
      let prefix: Buffer;
      if ((this.prefixHave ?? 0) === 0 && data.length - at >= PREFIX_BYTES) {
        prefix = data.subarray(at, at + PREFIX_BYTES);
        at += PREFIX_BYTES;
      } else {
        this.prefix ??= Buffer.alloc(PREFIX_BYTES);
        const have = this.prefixHave ?? 0;
        const take = Math.min(PREFIX_BYTES - have, data.length - at);
        data.copy(this.prefix, have, at, at + take);
        at += take;
        this.prefixHave = have + take;
        if (this.prefixHave < PREFIX_BYTES) break;
        prefix = this.prefix;
      }
      this.prefixHave = 0;
      const size = prefix.readUInt32BE(1);
      if (this.maxReadMessageLength !== -1 && size > this.maxReadMessageLength) {
        throw new Error(`Received message larger than max (${size} vs ${this.maxReadMessageLength})`);
      }
      if (data.length - at < size) {
        this.held = Buffer.concat([prefix, data.subarray(at)]);
        break;
      }
      this.joining = allocateMessage(size);
      prefix.copy(this.joining, 0, 0, PREFIX_BYTES);
      this.filled = PREFIX_BYTES;
    }
    const take = Math.min(this.joining.length - this.filled!, data.length - at);
    data.copy(this.joining, this.filled!, at, at + take);
    at += take;
    this.filled! += take;
    if (this.filled === this.joining.length) {
      done.push(this.joining);
      this.joining = undefined;
    }
  }
  return done;
}

/** Memory for a message of `size` bytes and its prefix: shared from {@link SHARED_MESSAGE_BYTES} on, ordinary below (content not initialised). */
function allocateMessage(size: number): Buffer {
  return size >= SHARED_MESSAGE_BYTES ? spareRequestMemory.take(PREFIX_BYTES + size) : Buffer.allocUnsafe(PREFIX_BYTES + size);
}

/** grpc-js's decoder class, as its server and client calls construct it (an internal module of grpc-js 1.14, pinned in package.json). */
interface GrpcStreamDecoder {
  prototype: { write(data: Buffer): Buffer[] };
}

/**
 * Makes every gRPC call of this process (server and client side) join its
 * incoming messages with {@link joinOnArrival}. Idempotent. grpc-js reads
 * the class from its module at each call's start, so calls started after
 * this use it.
 *
 * @throws Error when grpc-js no longer has the module or class (an upgrade
 *   moved it): the server refuses to start rather than run without it.
 */
export function joinGrpcMessagesOnArrival(): void {
  const require = createRequire(import.meta.url);
  const decoder = (require("@grpc/grpc-js/build/src/stream-decoder.js") as { StreamDecoder?: GrpcStreamDecoder }).StreamDecoder;
  if (typeof decoder?.prototype.write !== "function") throw new Error("grpc-js has no StreamDecoder.prototype.write to replace (grpc-js was upgraded past 1.14?)");
  decoder.prototype.write = joinOnArrival as unknown as (data: Buffer) => Buffer[];
}
