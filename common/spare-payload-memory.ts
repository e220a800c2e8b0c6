import { PAYLOAD_HEADROOM_BYTES } from "./payload-headroom.js";

/**
 * Memory for large payloads joined on the main thread (a Redis Load's
 * chunks, session-store/redis-payload.ts), kept for the next one once the
 * transport has finished sending the answer it held (issue 11).
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
 * given back by whoever was the last to hold it: the gRPC adapter, when
 * the answer's bytes have been written to the socket
 * (server/grpc-framed-answers.ts). Memory never given back (an answer whose
 * call failed, or a payload read for another purpose) is left to the
 * garbage collector as before. At most one spare is kept (the largest given
 * back), and it is dropped when the server trims its memory after a burst
 * of large calls (server/memory-trim.ts).
 */
export class SparePayloadMemory {
  private spare: ArrayBuffer | undefined;
  private readonly issued = new WeakSet<ArrayBuffer>();

  /**
   * A buffer of `size` bytes with {@link PAYLOAD_HEADROOM_BYTES} free before
   * it, for the caller alone until given back: the spare when it is large
   * enough, else new memory.
   *
   * @param size the payload's length in bytes.
   * @returns a view of `size` bytes at offset {@link PAYLOAD_HEADROOM_BYTES} of its ArrayBuffer (content not initialised; the ArrayBuffer may be longer).
   */
  take(size: number): Buffer {
    const bytes = PAYLOAD_HEADROOM_BYTES + size;
    let memory = this.spare;
    if (memory !== undefined && memory.byteLength >= bytes) this.spare = undefined;
    else {
      memory = new ArrayBuffer(bytes);
      this.issued.add(memory);
    }
    return Buffer.from(memory, PAYLOAD_HEADROOM_BYTES, size);
  }

  /**
   * Hands back memory from {@link take} that nobody reads or writes any more:
   * it becomes the spare unless the spare is larger. Memory that did not
   * come from {@link take} is ignored.
   */
  giveBack(memory: ArrayBufferLike): void {
    if (!(memory instanceof ArrayBuffer) || !this.issued.has(memory) || memory === this.spare) return;
    if (this.spare === undefined || memory.byteLength > this.spare.byteLength) this.spare = memory;
  }

  /** Whether `memory` came from {@link take} (and so may be given back). */
  owns(memory: ArrayBufferLike): boolean {
    return memory instanceof ArrayBuffer && this.issued.has(memory);
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

/** The process's one {@link SparePayloadMemory}. */
export const sparePayloadMemory = new SparePayloadMemory();
