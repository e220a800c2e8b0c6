import { afterEach, beforeEach, describe, expect, test, vi } from "vitest";
import { Code, ConnectError } from "@connectrpc/connect";
import { deadlineAfter, MAX_TIMER_MS } from "../../common/timer-limit.js";
import { streamCall, unaryCall } from "../../clients/call.js";
import { InvalidRequestError } from "../../clients/errors.js";

const DAY_MS = 86_400_000;

/** A call that runs until its signal aborts, then fails with the signal's reason, as connect-es does; notes the timeout it was given. */
function untilAborted(seen: Array<number | undefined>) {
  return (o: { signal?: AbortSignal; timeoutMs?: number }) =>
    new Promise<never>((_, reject) => {
      seen.push(o.timeoutMs);
      o.signal?.addEventListener("abort", () => reject(ConnectError.from(o.signal!.reason)));
    });
}

/**
 * Deadlines past a Node.js timer's reach (common/timer-limit.ts): a single
 * `setTimeout` of more than 2^31 − 1 ms fires after 1 ms, so such a wait is
 * timers in a row, and the clients time such a deadline themselves
 * (clients/call.ts) instead of handing it to connect-es. Timers are faked so
 * that 30 days pass at once.
 */
describe("deadlines beyond a timer's reach", () => {
  beforeEach(() => void vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] }));
  afterEach(() => void vi.useRealTimers());

  test("deadlineAfter(30 days) aborts after 30 days, not after 1 ms nor after 24.8 days", () => {
    const deadline = deadlineAfter(30 * DAY_MS, () => "late");
    vi.advanceTimersByTime(1);
    expect(deadline.signal.aborted).toBe(false);
    vi.advanceTimersByTime(MAX_TIMER_MS);
    expect(deadline.signal.aborted).toBe(false);
    vi.advanceTimersByTime(30 * DAY_MS - MAX_TIMER_MS - 2);
    expect(deadline.signal.aborted).toBe(false);
    vi.advanceTimersByTime(1);
    expect(deadline.signal.aborted).toBe(true);
    expect(deadline.signal.reason).toBe("late");
  });

  test("clear stops it", () => {
    const deadline = deadlineAfter(30 * DAY_MS, () => "late");
    deadline.clear();
    vi.advanceTimersByTime(31 * DAY_MS);
    expect(deadline.signal.aborted).toBe(false);
    expect(vi.getTimerCount()).toBe(0);
  });

  test("a unary call with a 30-day deadline is sent without one and fails TimeoutError when it passes", async () => {
    const seen: Array<number | undefined> = [];
    const outcome = unaryCall("Test/Unary", { timeoutMs: 30 * DAY_MS }, untilAborted(seen)).catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(30 * DAY_MS - 1);
    expect(seen).toEqual([undefined]);
    await vi.advanceTimersByTimeAsync(1);
    const err = await outcome;
    expect((err as Error).name).toBe("TimeoutError");
    expect(vi.getTimerCount()).toBe(0);
  });

  test("a deadline a timer can hold is handed to the transport as it is", async () => {
    const seen: Array<number | undefined> = [];
    const done = unaryCall("Test/Unary", { timeoutMs: MAX_TIMER_MS }, async (o) => (seen.push(o.timeoutMs), "answer"));
    expect(await done).toBe("answer");
    expect(seen).toEqual([MAX_TIMER_MS]);
  });

  test("a stream with a 30-day deadline fails TimeoutError when it passes, and its timer goes with it", async () => {
    const seen: Array<number | undefined> = [];
    const stream = streamCall(
      "Test/Stream",
      { timeoutMs: 30 * DAY_MS },
      (o) => ({
        async *[Symbol.asyncIterator]() {
          yield* [];
          await untilAborted(seen)(o);
        },
      }),
      (m: never) => m,
    );
    const outcome = stream.next().catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(30 * DAY_MS);
    const err = await outcome;
    expect((err as Error).name).toBe("TimeoutError");
    expect(seen).toEqual([undefined]);
    expect(vi.getTimerCount()).toBe(0);
  });

  test("a timeoutMs that is NaN is refused as InvalidRequestError naming it, and nothing is sent", async () => {
    const seen: Array<number | undefined> = [];
    const unary = await unaryCall("Test/Unary", { timeoutMs: Number.NaN }, untilAborted(seen)).catch((e: unknown) => e);
    expect(unary).toBeInstanceOf(InvalidRequestError);
    expect((unary as Error).message).toContain("timeoutMs");
    const opened = (o: { timeoutMs?: number }): AsyncIterable<never> => {
      seen.push(o.timeoutMs);
      return (async function* () {})();
    };
    const stream = await streamCall("Test/Stream", { timeoutMs: Number.NaN }, opened, (m: never) => m)
      .next()
      .catch((e: unknown) => e);
    expect(stream).toBeInstanceOf(InvalidRequestError);
    expect(seen).toEqual([]);
    expect(vi.getTimerCount()).toBe(0);
    expect(() => deadlineAfter(Number.NaN, () => "late")).toThrow(RangeError);
  });
});
