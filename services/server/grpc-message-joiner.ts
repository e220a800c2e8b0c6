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
  /** The message being filled (prefix included), once its prefix is whole. */
  joining?: Buffer;
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
 * Memory: the whole message is allocated when its prefix arrives, before
 * its body, after its length was checked against the message limit. The
 * request watch (grpc-request-watch.ts) charges the same bytes to the
 * in-flight budget from the same prefix and, when they do not fit, holds
 * the rest of the body back until they do or the call is refused
 * RESOURCE_EXHAUSTED (2 s). The allocation itself is not held back: a
 * client announcing large messages on many streams and sending nothing
 * makes the server reserve that much address space (a fresh-eyes run: 1,000
 * streams announcing 65 MiB, about 80 GB virtual, 165 MB resident, all
 * refused after 2 s). The pages are touched only as the body arrives, so
 * resident memory stays within the budget.
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
      this.joining = size >= SHARED_MESSAGE_BYTES ? spareRequestMemory.take(PREFIX_BYTES + size) : Buffer.allocUnsafe(PREFIX_BYTES + size);
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
