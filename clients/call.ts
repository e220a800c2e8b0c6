import { Code, ConnectError } from "@connectrpc/connect";
import { classify, InvalidRequestError, toAbortReason, type StatusMapper } from "./errors.js";

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
   * `TimeoutError` (a context error, not an infrastructure error).
   */
  timeoutMs?: number;
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
  try {
    return await run({ signal: options?.signal, timeoutMs: options?.timeoutMs });
  } catch (err) {
    throw callerError(err, operation, options, map);
  }
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
  const signal = options?.signal === undefined ? local.signal : AbortSignal.any([options.signal, local.signal]);
  try {
    for await (const message of open({ signal, timeoutMs: options?.timeoutMs })) {
      if (options?.signal?.aborted) return;
      yield check(message);
    }
  } catch (err) {
    if (options?.signal?.aborted) return;
    throw callerError(err, operation, options, map);
  } finally {
    local.abort();
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
