import { PAYLOAD_HEADROOM_BYTES } from "./payload-headroom.js";

/**
 * Memory for large payloads joined on the main thread, kept for the next
 * one once nothing reads it any more (issue 11): a Redis Load's chunks
 * (session-store/redis-payload.ts), kept once the transport has finished
 * sending the answer it held, and a large request's bytes
 * ({@link spareRequestMemory}).
 *
 * Why: on this project's VMs a 64 MiB buffer touched for the first time
 * costs ~35 ms of page faults, far more than the copy itself (~7 ms into
 * memory used before); joining every large Load into fresh memory kept the
 * main thread busy ~100 ms per Load on a slow machine, and each small call
 * beside it waited for several 4 MiB slices of that (bench/RESULTS.md). Large
 * Loads of one session come one after another, so the memory of the last
 * answer serves the next.
 *
 * Only memory handed out by {@link take} is ever kept, and only once it is
 * given back by whoever was the last to hold it: for a Load answer the gRPC
 * adapter, when the answer's bytes have been written to the socket
 * (server/grpc-framed-answers.ts); for a request the session store service,
 * once its store has answered the Save. Memory never given back (an answer
 * whose call failed, a request whose store call failed, or a payload read
 * for another purpose) is left to the
 * garbage collector as before. At most one spare is kept (the largest given
 * back), and it is dropped when the server trims its memory after a burst
 * of large calls (server/memory-trim.ts). The memory a spare came from may
 * be longer than a later view of it: readers must use the view's offset and
 * length, never the whole memory.
 */
export class SparePayloadMemory<M extends ArrayBuffer | SharedArrayBuffer = ArrayBuffer> {
  private spare: M | undefined;
  private readonly issued = new WeakSet<ArrayBufferLike>();

  /**
   * @param headroomBytes bytes left free before each view {@link take} answers
   *   (default {@link PAYLOAD_HEADROOM_BYTES}, for Load answers framed in place).
   * @param allocate makes new memory of the given byte length (default: an ArrayBuffer).
   */
  constructor(
    private readonly headroomBytes: number = PAYLOAD_HEADROOM_BYTES,
    private readonly allocate: (bytes: number) => M = (bytes) => new ArrayBuffer(bytes) as M,
  ) {}

  /**
   * A buffer of `size` bytes with the headroom free before it, for the
   * caller alone until given back: the spare when it is large enough, else
   * new memory.
   *
   * @param size the payload's length in bytes.
   * @returns a view of `size` bytes at offset `headroomBytes` of its memory (content not initialised; the memory may be longer).
   */
  take(size: number): Buffer {
    const bytes = this.headroomBytes + size;
    let memory = this.spare;
    if (memory !== undefined && memory.byteLength >= bytes) this.spare = undefined;
    else {
      memory = this.allocate(bytes);
      this.issued.add(memory);
    }
    return Buffer.from(memory, this.headroomBytes, size);
  }

  /**
   * Hands back memory from {@link take} that nobody reads or writes any more:
   * it becomes the spare unless the spare is larger. Memory that did not
   * come from {@link take} is ignored.
   */
  giveBack(memory: ArrayBufferLike): void {
    if (!this.issued.has(memory) || memory === this.spare) return;
    if (this.spare === undefined || memory.byteLength > this.spare.byteLength) this.spare = memory as M;
  }

  /** Whether `memory` came from {@link take} (and so may be given back). */
  owns(memory: ArrayBufferLike): boolean {
    return this.issued.has(memory);
  }

  /** Lets the spare go (the process is idle). */
  drop(): void {
    this.spare = undefined;
  }

  /** Bytes held by the spare (0 when none): for tests. */
  get heldBytes(): number {
    return this.spare?.byteLength ?? 0;
  }
}

/** The process's {@link SparePayloadMemory} for large Load answers (their payload joined on the main thread). */
export const sparePayloadMemory = new SparePayloadMemory();

/**
 * The process's {@link SparePayloadMemory} for large gRPC requests, joined as
 * they arrive (server/grpc-message-joiner.ts) in shared memory that worker
 * threads read without a copy: no headroom (the 5-byte message prefix is
 * part of what is joined). On these VMs, joining a 64 MiB Save into fresh
 * memory spent ~120 ms of the main thread in page faults and copying, ~50 ms
 * into memory used before (CPU profiles, bench/RESULTS.md). A request's
 * memory is given back only by the service that knows nothing reads it any
 * more: the session store, once a Save or Create has been answered by its
 * store (session-store/service.ts).
 */
export const spareRequestMemory = new SparePayloadMemory<SharedArrayBuffer>(0, (bytes) => new SharedArrayBuffer(bytes));
