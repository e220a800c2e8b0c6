import { Code, ConnectError } from "@connectrpc/connect";
import { HELD_COPIES, type InflightBudget } from "./inflight-budget.js";

/** Most bytes a request of unknown length takes from the budget at once, beyond what it already holds (1 MiB). */
export const REQUEST_STEP_BYTES = 1024 * 1024;

/**
 * One Connect-listener call's bytes in the in-flight budget
 * (`--max-inflight-bytes`, issue 10 deliverable 3), the same rules as the
 * gRPC listener's (admission.ts, grpc-adapter.ts) with what HTTP tells:
 *
 * - request bytes: a declared `content-length` is taken before the body is
 *   read ({@link reserveRequest}); otherwise (HTTP/2, chunked HTTP/1.1) the
 *   body is charged as it arrives ({@link chargedRequest}): whenever its
 *   bytes pass what the call holds, it takes as much again as it holds (at
 *   least the bytes missing, at most {@link REQUEST_STEP_BYTES} more, and
 *   not past a third of the budget), reading nothing more while it waits;
 *   held until the call ends, or given back at once when the request is
 *   refused;
 * - answer bytes: each chunk connect-node writes is taken before it is
 *   written and given back once written ({@link chargedAnswer}); only a
 *   read's chunk over 64 KiB may wait or be refused, as the method has run;
 * - a take waits up to the budget's wait, then fails RESOURCE_EXHAUSTED (at
 *   once when the call's bytes are more than the whole budget allows);
 * - everything still held is given back when the answer is written or the
 *   response closes (the client went away): call {@link end} then.
 */
export class ConnectCallBytes {
  private requestHeld = 0;
  private requestReceived = 0;
  private answerHeld = 0;
  private ended = false;

  /** @param budget the process's budget; undefined for a call that is not charged (health, like on the gRPC listener). */
  constructor(private readonly budget: InflightBudget | undefined) {}

  /**
   * Takes `bytes` of request (a declared `content-length`) before the body is read.
   *
   * @throws ConnectError RESOURCE_EXHAUSTED (see the class), CANCELED when the call ended meanwhile.
   */
  async reserveRequest(bytes: number): Promise<void> {
    const held = this.requestHeld;
    await this.take(bytes, async (budget) => {
      if (!budget.tryTake(bytes)) await budget.take(bytes, "request", held);
    });
    this.requestHeld += bytes;
  }

  /**
   * The request body `body`, charged chunk by chunk beyond what
   * {@link reserveRequest} took.
   *
   * @throws ConnectError RESOURCE_EXHAUSTED from the iteration when the body outgrows the budget.
   */
  async *chargedRequest(body: AsyncIterable<Uint8Array>): AsyncIterable<Uint8Array> {
    try {
      for await (const chunk of body) {
        this.requestReceived += chunk.length;
        const missing = this.requestReceived - this.requestHeld;
        if (missing > 0) await this.reserveRequest(this.requestStep(missing));
        yield chunk;
      }
    } catch (err) {
      // The request is refused (over the budget, or its bytes stopped coming): what it holds is dropped, so its bytes are
      // given back before its refusal is written, which must not wait behind them.
      this.releaseRequest();
      throw err;
    }
  }

  /**
   * Bytes a request of unknown length takes when `missing` bytes have arrived
   * beyond what it holds: as much again as it holds (at least `missing`, at
   * most {@link REQUEST_STEP_BYTES} more), but never past the most one call
   * may hold (a third of the budget), so that a request within that is not
   * refused for a step it would never use.
   */
  private requestStep(missing: number): number {
    const step = Math.max(missing, Math.min(this.requestHeld, REQUEST_STEP_BYTES));
    if (this.budget === undefined) return step;
    const room = Math.floor(this.budget.limitBytes / HELD_COPIES) - this.requestHeld;
    return Math.max(missing, Math.min(step, room));
  }

  /**
   * The answer body `body`, each chunk taken from the budget before it is
   * handed on and given back when the next one is asked for (connect-node
   * asks once the chunk is written) or the answer ends.
   *
   * @param read true for a method that changes nothing (read-only-methods.ts).
   * @throws ConnectError RESOURCE_EXHAUSTED from the iteration when a read's chunk over 64 KiB finds no room in time.
   */
  async *chargedAnswer(body: AsyncIterable<Uint8Array>, read: boolean): AsyncIterable<Uint8Array> {
    try {
      for await (const chunk of body) {
        await this.take(chunk.length, (budget) => budget.takeAnswer(chunk.length, read));
        this.answerHeld = chunk.length;
        yield chunk;
        this.releaseAnswer();
      }
    } finally {
      this.releaseAnswer();
    }
  }

  /** The call has ended (its answer written, or its response closed): gives back everything it holds; later takes fail. Idempotent. */
  end(): void {
    this.ended = true;
    this.releaseRequest();
    this.releaseAnswer();
  }

  private releaseRequest(): void {
    this.budget?.release(this.requestHeld);
    this.requestHeld = 0;
  }

  private releaseAnswer(): void {
    this.budget?.release(this.answerHeld);
    this.answerHeld = 0;
  }

  /**
   * Takes `bytes` through `acquire` (one of the budget's takes); gives them
   * back at once if the call ended meanwhile.
   *
   * @throws ConnectError CANCELED when the call has ended; what `acquire` throws.
   */
  private async take(bytes: number, acquire: (budget: InflightBudget) => Promise<void>): Promise<void> {
    if (this.ended) throw clientGone();
    if (this.budget === undefined) return;
    await acquire(this.budget);
    if (this.ended) {
      this.budget.release(bytes);
      throw clientGone();
    }
  }
}

function clientGone(): ConnectError {
  return new ConnectError("the client went away", Code.Canceled);
}
