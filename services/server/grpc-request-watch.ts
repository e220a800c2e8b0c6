import type { ServerHttp2Stream } from "node:http2";
import { gunzipSync, inflateSync } from "node:zlib";
import { Code, ConnectError } from "@connectrpc/connect";
import type { InflightBudget } from "./inflight-budget.js";
import { SECOND_MESSAGE } from "./grpc-framing-status.js";
import { requestIdleRefusal } from "./idle-bounded-body.js";

/** Bytes of the gRPC message prefix: a flag byte and a 4-byte big-endian length (charged with the request). */
export const GRPC_PREFIX_BYTES = 5;

/** The decoders of the compressions grpc-js accepts for requests (`grpc-encoding`). */
const DECOMPRESS: Record<string, (data: Buffer, options: { maxOutputLength: number }) => Buffer> = { gzip: gunzipSync, deflate: inflateSync };

const refusal = (problem: string) => new ConnectError(`request: ${problem}`, Code.InvalidArgument);

/** How one call's request is watched (see {@link GrpcRequestWatch}). */
export interface RequestWatchSettings {
  /**
   * The in-flight budget, or undefined for a call that must be answered even
   * when it is full (health, admission.ts), whose messages are then not
   * charged and must be small (`maxMessageBytes`).
   */
  budget: InflightBudget | undefined;
  /** The call's `grpc-encoding` (`identity` when absent). */
  encoding: string;
  /** Largest message accepted, decompressed, in bytes. */
  maxMessageBytes: number;
  /** Milliseconds a message admitted to the budget may receive no bytes before the call is refused UNAVAILABLE (`--request-idle-timeout`). */
  idleMs: number;
}

/**
 * Watches the body of one gRPC call on the HTTP/2 `stream` as it arrives,
 * before grpc-js reads it (issue 10 deliverables 1 and 3; wire-contract.md
 * section 1: a bad request is INVALID_ARGUMENT and changes nothing):
 *
 * - the request's bytes are taken from `budget` as soon as the message's
 *   length prefix arrives, before the rest is read: when they do not fit,
 *   reading pauses (HTTP/2 flow control holds the client back) until there
 *   is room, or the call is refused RESOURCE_EXHAUSTED. A prefix announcing
 *   more than `maxMessageBytes` takes nothing and is refused
 *   RESOURCE_EXHAUSTED at once, in grpc-js's words (`Received message larger
 *   than max (N vs M)`). The bytes are given back when the stream
 *   closes (admission.ts resets a stream whose call was answered before its
 *   body arrived whole, so a client that keeps it open cannot hold them);
 * - a prefix whose flags are not 0 or 1, or that marks the message
 *   compressed while the call names no compression (`grpc-encoding`
 *   absent or `identity`), is refused INVALID_ARGUMENT;
 * - a compressed message that does not decompress is refused
 *   INVALID_ARGUMENT before grpc-js, which would answer INTERNAL, tries; one
 *   that decompresses to more than `maxMessageBytes` is refused
 *   RESOURCE_EXHAUSTED (decompression stops there);
 * - the whole prefix of a second message is refused INVALID_ARGUMENT at
 *   once, before the message is read: a unary or server-streaming call
 *   takes one message, and only the first is charged to the budget (a
 *   fresh-eyes run: a small Load followed by a 65 MiB second message held
 *   that memory outside the budget until the message was whole);
 * - {@link trailing} tells whether bytes (less than a prefix) followed the
 *   one message (grpc-js drops a cut-short second message silently);
 * - a message admitted to the budget whose bytes stop arriving before it is
 *   whole, for `idleMs`, is refused UNAVAILABLE (nothing was stored; a retry
 *   is safe): without this, a client that announced 64 MiB and then sent
 *   nothing held that share of the budget until it reset the stream or its
 *   deadline passed, which a call without a deadline never does, and
 *   large calls of every other client waited for room (issue 11, a
 *   fresh-eyes run). Time spent paused while the budget has no room does
 *   not count. So is one whose message came whole but whose request does not
 *   end (END_STREAM) for `idleMs`: its method never runs, and it held its
 *   share for as long as the stream lived (a fresh-eyes run);
 * - the method runs only once the message is admitted to the budget
 *   ({@link whenAdmitted}), though a small message is whole before the
 *   stream's pause can take effect.
 *
 * Refusals go through `refuse` (once: the first refusal ends the call),
 * and grpc-js discards what still arrives. It reads the HTTP/2 stream grpc-js keeps on its base call
 * (an internal of grpc-js 1.14, pinned in package.json; the budget tests in
 * test/transport/inflight-budget.test.ts fail if it moves).
 *
 * @param settings see {@link RequestWatchSettings}.
 * @param refuse ends the call with the refusal's status and message.
 */
export class GrpcRequestWatch {
  private prefix: Buffer = Buffer.alloc(0);
  /** Bytes the prefix declares for the message, once it has arrived. */
  private declared: number | undefined;
  private received = 0;
  private taken = 0;
  /** The compressed message's chunks so far, while it is being collected for its check; the first starts at stream offset {@link collectedFrom}. */
  private compressed: Buffer[] | undefined;
  private collectedFrom = 0;
  /** Set once the call was refused: it is refused once. */
  private refused = false;
  private readonly refuse: (err: ConnectError) => void;
  /** Armed while an admitted request has not ended: fires when no bytes arrived (or, the message whole, no end) for `settings.idleMs`. */
  private idleTimer: NodeJS.Timeout | undefined;
  /** What waits for the message's admission ({@link whenAdmitted}); dropped when the call is refused. */
  private waiting: Array<() => void> = [];
  /** Set once the request has ended (END_STREAM). */
  private ended = false;

  constructor(
    private readonly stream: ServerHttp2Stream,
    private readonly settings: RequestWatchSettings,
    refuse: (err: ConnectError) => void,
  ) {
    this.refuse = (err) => {
      if (this.refused) return;
      this.refused = true;
      this.waiting = [];
      clearTimeout(this.idleTimer);
      refuse(err);
    };
    stream.prependListener("data", this.onData);
    stream.once("end", () => {
      this.ended = true;
      clearTimeout(this.idleTimer);
    });
    stream.once("close", () => {
      stream.off("data", this.onData);
      clearTimeout(this.idleTimer);
      if (this.taken > 0) settings.budget?.release(this.taken);
    });
  }

  /**
   * Runs `run` once the request message's bytes are taken from the budget:
   * at once if they are, later if the budget has no room yet, never if the
   * call is refused meanwhile. The method must not run before: a message
   * that arrives in one chunk is whole before its pause takes effect, and a
   * method run while its budget wait timed out was answered
   * RESOURCE_EXHAUSTED "retry later" after its write was stored (a
   * fresh-eyes run, both gRPC paths).
   */
  whenAdmitted(run: () => void): void {
    if (this.refused) return;
    // No message prefix came: nothing is charged, and the caller refuses the empty request.
    if (this.admitted() || this.declared === undefined) run();
    else this.waiting.push(run);
  }

  /** True once the message's bytes are taken from the budget (at once without one). */
  private admitted(): boolean {
    return this.taken > 0 || this.settings.budget === undefined;
  }

  /** A refusal for the bytes after the one request message, or undefined when the body held no more than it. */
  trailing(): ConnectError | undefined {
    const whole = this.declared === undefined ? undefined : GRPC_PREFIX_BYTES + this.declared;
    if (whole === undefined || this.received <= whole) return undefined;
    return refusal(`${this.received - whole} bytes follow the request message; this method takes one message`);
  }

  private readonly onData = (chunk: Buffer) => {
    this.received += chunk.length;
    if (this.compressed !== undefined) this.collect(chunk);
    else if (this.declared === undefined) this.readPrefix(chunk);
    const declared = this.declared;
    if (declared !== undefined && this.received >= 2 * GRPC_PREFIX_BYTES + declared) {
      this.refuse(new ConnectError(SECOND_MESSAGE, Code.InvalidArgument));
    }
    this.idleTimer?.refresh();
  };

  /**
   * The message is admitted: runs what waited for it, and starts counting
   * idle time until the request ends (see the class comment). A message
   * whole but never followed by its end (END_STREAM) would otherwise hold its
   * share of the budget for as long as the stream lived (a fresh-eyes run).
   */
  private admit(bytes: number): void {
    this.taken = bytes;
    if (this.refused) return;
    if (!this.ended) {
      const { idleMs } = this.settings;
      this.idleTimer = setTimeout(() => this.refuse(this.idleRefusal(idleMs)), idleMs);
      this.idleTimer.unref();
    }
    const waiting = this.waiting;
    this.waiting = [];
    for (const run of waiting) run();
  }

  private idleRefusal(idleMs: number): ConnectError {
    const whole = GRPC_PREFIX_BYTES + this.declared!;
    if (this.received < whole) return requestIdleRefusal(idleMs, "message", `${this.received} of ${whole} bytes`);
    return new ConnectError(
      `request: the request message arrived whole but the request did not end (no END_STREAM) for ${idleMs} ms (--request-idle-timeout); nothing was stored`,
      Code.Unavailable,
    );
  }

  /** Reads the message prefix from `chunk` (whose bytes count in {@link received} already), and takes the message's bytes from the budget once it is whole. */
  private readPrefix(chunk: Buffer): void {
    // The prefix nearly always comes whole in the first chunk; join pieces only when it does not.
    this.prefix = this.prefix.length === 0 && chunk.length >= GRPC_PREFIX_BYTES ? chunk : Buffer.concat([this.prefix, chunk.subarray(0, GRPC_PREFIX_BYTES - this.prefix.length)]);
    if (this.prefix.length < GRPC_PREFIX_BYTES) return;
    const flags = this.prefix[0]!;
    this.declared = this.prefix.readUInt32BE(1);
    if (flags > 1) return this.refuse(refusal(`the message prefix's flags are 0x${flags.toString(16).padStart(2, "0")}; only 0 (plain) and 1 (compressed) exist`));
    if (flags === 1 && this.settings.encoding === "identity") {
      return this.refuse(refusal("the message is marked compressed, but the call names no compression (grpc-encoding)"));
    }
    if (this.declared > this.settings.maxMessageBytes) {
      return this.refuse(new ConnectError(`Received message larger than max (${this.declared} vs ${this.settings.maxMessageBytes})`, Code.ResourceExhausted));
    }
    this.take(GRPC_PREFIX_BYTES + this.declared);
    if (flags === 1 && DECOMPRESS[this.settings.encoding] !== undefined) {
      // This chunk completed the prefix, and may begin before it (a prefix split over chunks).
      this.compressed = [];
      this.collectedFrom = this.received - chunk.length;
      this.collect(chunk);
    }
  }

  /** Adds `chunk` (whose bytes count in {@link received} already) to the compressed message; checks it once whole. */
  private collect(chunk: Buffer): void {
    this.compressed!.push(chunk);
    const whole = GRPC_PREFIX_BYTES + this.declared!;
    if (this.received < whole) return;
    const message = Buffer.concat(this.compressed!).subarray(GRPC_PREFIX_BYTES - this.collectedFrom, whole - this.collectedFrom);
    this.compressed = undefined;
    try {
      DECOMPRESS[this.settings.encoding]!(message, { maxOutputLength: this.settings.maxMessageBytes });
    } catch (err) {
      // Too large decompressed: refused in grpc-js's words (grpc-js checks its own limit only, which health's is below).
      if ((err as { code?: string }).code === "ERR_BUFFER_TOO_LARGE") {
        return this.refuse(new ConnectError(`Received message that decompresses to a size larger than ${this.settings.maxMessageBytes}`, Code.ResourceExhausted));
      }
      this.refuse(refusal(`the ${this.settings.encoding}-compressed message does not decompress (${(err as Error).message})`));
    }
  }

  /** Takes `bytes` from the budget (if there is one), pausing the stream while it waits for room. */
  private take(bytes: number): void {
    const budget = this.settings.budget;
    if (budget === undefined) return;
    if (budget.tryTake(bytes)) return this.admit(bytes);
    this.stream.pause();
    budget.take(bytes, "request").then(
      () => {
        if (this.stream.closed) budget.release(bytes);
        else {
          this.stream.resume();
          this.admit(bytes);
        }
      },
      this.refuse,
    );
  }
}
