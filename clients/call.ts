import { Code, ConnectError } from "@connectrpc/connect";
import { classify, InvalidRequestError, refusedStream, toAbortReason, type StatusMapper } from "./errors.js";
import { deadlineAfter, MAX_TIMER_MS } from "../common/timer-limit.js";

/**
 * Per-call options every client method takes. Nothing is set by default: no
 * deadline and no retries (wire-contract.md section 1).
 */
export interface CallOptions {
  /** Aborting cancels the call: unary calls reject with the signal's reason; streams end cleanly. */
  signal?: AbortSignal;
  /**
   * The caller's deadline in milliseconds, passed to the server as
   * `grpc-timeout`. When it passes the call rejects with a DOMException named
   * `TimeoutError` (a context error, not an infrastructure error). A deadline
   * beyond a Node.js timer's reach (2^31 − 1 ms, about 24.8 days) is held
   * here and not sent: connect-es would end the call within milliseconds,
   * and the server sets no timer for one anyway (see {@link callDeadline}).
   */
  timeoutMs?: number;
}

/**
 * How a call carries the caller's deadline. One connect-es can time (at
 * most MAX_TIMER_MS) is sent as `timeoutMs`, and connect-es times it. A
 * longer one is timed here by `signal` (timers in a row, common/timer-limit.ts),
 * which cancels the call with DEADLINE_EXCEEDED when the deadline passes
 * ({@link callerError} then gives the same `TimeoutError`); such a request
 * carries no `grpc-timeout`, as the server would drop it (wire-contract.md
 * section 1: the caller's deadline is the client's to keep). `remainingMs`
 * is what each send of the call passes as `timeoutMs` (what is left of the
 * deadline; undefined for none or one timed here). `clear` when the call is
 * over.
 *
 * @throws InvalidRequestError naming `timeoutMs` when it is not a number (NaN): no RPC is sent.
 */
function callDeadline(operation: string, options: CallOptions | undefined): { remainingMs: () => number | undefined; signal?: AbortSignal; clear: () => void } {
  const timeoutMs = options?.timeoutMs;
  if (timeoutMs !== undefined && (typeof timeoutMs !== "number" || Number.isNaN(timeoutMs))) {
    throw new InvalidRequestError(`timeoutMs must be a number of milliseconds, got ${String(timeoutMs)}`, operation);
  }
  if (timeoutMs === undefined) return { remainingMs: () => undefined, clear: () => undefined };
  if (timeoutMs > MAX_TIMER_MS) {
    const held = deadlineAfter(timeoutMs, () => new ConnectError(`the deadline of ${timeoutMs} ms passed`, Code.DeadlineExceeded));
    return { remainingMs: () => undefined, signal: held.signal, clear: held.clear };
  }
  // A call sent again after a refusal gets what is left of the deadline (whole milliseconds, as grpc-timeout carries), not all of it again.
  const started = performance.now();
  return { remainingMs: () => Math.max(Math.min(timeoutMs, 0), Math.floor(timeoutMs - (performance.now() - started))), clear: () => undefined };
}

/** One signal that aborts when any of `signals` does (undefined ones left out). */
function anyOf(...signals: Array<AbortSignal | undefined>): AbortSignal | undefined {
  const given = signals.filter((s): s is AbortSignal => s !== undefined);
  return given.length <= 1 ? given[0] : AbortSignal.any(given);
}

/** @throws InvalidRequestError naming `field` when `value` is empty or only spaces (no RPC is sent). */
export function requireText(operation: string, field: string, value: string): string {
  if (typeof value !== "string" || value.trim() === "") throw new InvalidRequestError(`${field} must not be blank`, operation);
  return value;
}

function callerError(err: unknown, operation: string, options: CallOptions | undefined, map?: StatusMapper): Error {
  if (options?.timeoutMs !== undefined && !options.signal?.aborted && err instanceof ConnectError && err.code === Code.DeadlineExceeded) {
    return new DOMException(`${operation}: the caller's deadline of ${options.timeoutMs} ms passed`, "TimeoutError");
  }
  return classify(err, operation, options?.signal, map);
}

/**
 * Runs one unary RPC with the caller's signal and deadline and turns any
 * failure into the client's error vocabulary ({@link classify}).
 */
export async function unaryCall<T>(
  operation: string,
  options: CallOptions | undefined,
  run: (o: { signal?: AbortSignal; timeoutMs?: number }) => Promise<T>,
  map?: StatusMapper,
): Promise<T> {
  if (options?.signal?.aborted) throw toAbortReason(options.signal);
  const deadline = callDeadline(operation, options);
  const signal = anyOf(options?.signal, deadline.signal);
  try {
    for (let attempt = 1; ; attempt++) {
      try {
        return await run({ signal, timeoutMs: deadline.remainingMs() });
      } catch (err) {
        if (!sendAgain(err, attempt, signal)) throw err;
      }
    }
  } catch (err) {
    throw callerError(err, operation, options, map);
  } finally {
    deadline.clear();
  }
}

/** Sends of one call at most: the first and {@link REFUSED_SENDS} − 1 more after refused streams. */
const REFUSED_SENDS = 3;

/**
 * Whether a call whose attempt `attempt` failed with `err` is sent again: only
 * when the server refused its stream unprocessed ({@link refusedStream}), at
 * most {@link REFUSED_SENDS} sends in all, within the caller's deadline and
 * signal. This is not a retry of the call's outcome, which the clients never
 * make (wire-contract.md section 1): nothing of a refused stream ran, and
 * grpc-go, which the harness uses, sends such a stream again by itself.
 */
function sendAgain(err: unknown, attempt: number, signal: AbortSignal | undefined): boolean {
  return attempt < REFUSED_SENDS && signal?.aborted !== true && refusedStream(err);
}

/**
 * Iterates one server stream. Each message goes through `check` (which may
 * throw to stop the stream with an invalid-response error). The stream ends
 * cleanly, without an error, when the caller's signal aborts (section 3.6:
 * cancellation is a normal end; any status arriving after it is ignored). A
 * mid-stream failure is thrown once, after the messages that preceded it.
 * Breaking out of the loop cancels the RPC.
 */
export async function* streamCall<M, R>(
  operation: string,
  options: CallOptions | undefined,
  open: (o: { signal: AbortSignal; timeoutMs?: number }) => AsyncIterable<M>,
  check: (message: M) => R,
  map?: StatusMapper,
): AsyncGenerator<R, void, undefined> {
  if (options?.signal?.aborted) return;
  const local = new AbortController();
  const deadline = callDeadline(operation, options);
  const signal = anyOf(options?.signal, local.signal, deadline.signal)!;
  try {
    // A stream the server refused before its first message is opened again (see sendAgain).
    let received = false;
    for (let attempt = 1; ; attempt++) {
      try {
        for await (const message of open({ signal, timeoutMs: deadline.remainingMs() })) {
          received = true;
          if (options?.signal?.aborted) return;
          yield check(message);
        }
        return;
      } catch (err) {
        if (received || !sendAgain(err, attempt, signal)) throw err;
      }
    }
  } catch (err) {
    if (options?.signal?.aborted) return;
    throw callerError(err, operation, options, map);
  } finally {
    local.abort();
    deadline.clear();
  }
}

/**
 * Runs an idempotent delete: NOT_FOUND from the driver counts as success
 * (wire-contract.md sections 2.5 and 5.5); other failures as {@link unaryCall}.
 */
export async function deleteCall(
  operation: string,
  options: CallOptions | undefined,
  run: (o: { signal?: AbortSignal; timeoutMs?: number }) => Promise<unknown>,
  map?: StatusMapper,
): Promise<void> {
  await unaryCall(
    operation,
    options,
    async (o) => {
      try {
        await run(o);
      } catch (err) {
        if (!(err instanceof ConnectError && err.code === Code.NotFound)) throw err;
      }
    },
    map,
  );
}
