import { afterEach, beforeEach, describe, expect, test, vi } from "vitest";
import { HELD_COPIES, InflightBudget, SMALL_CALL_BYTES } from "../../services/server/inflight-budget.js";
import { IDLE_WINDOW_MS, memoryTrimmer, TRIM_DELAY_MS, TRIM_WAIT_LIMIT_MS, type MemoryTrimmer } from "../../services/server/memory-trim.js";
import { sparePayloadMemory, spareRequestMemory } from "../../common/spare-payload-memory.js";

/** A trimmer that records what the budget asked of it. */
function recordingTrimmer(): MemoryTrimmer & { calls: string[] } {
  const calls: string[] = [];
  return { calls, schedule: () => calls.push("schedule"), cancel: () => calls.push("cancel") };
}

describe("in-flight budget and the idle memory trim (issue 10 deliverable 3; issue 11, no full collection in the middle of a burst)", () => {
  const MiB = 1024 * 1024;

  test("the trim is scheduled when the budget empties after a large burst, not after small calls", () => {
    const trimmer = recordingTrimmer();
    const budget = new InflightBudget(1024 * MiB, 100, undefined, { afterBytes: 64 * MiB, trimmer });
    expect(budget.tryTake(1000)).toBe(true);
    budget.release(1000);
    expect(trimmer.calls).toEqual([]);
    expect(budget.tryTake(64 * MiB)).toBe(true);
    budget.release(64 * MiB);
    expect(trimmer.calls).toEqual(["cancel", "schedule"]);
  });

  test("a large message taking budget cancels a scheduled trim; a small one does not", () => {
    const trimmer = recordingTrimmer();
    const budget = new InflightBudget(1024 * MiB, 100, undefined, { afterBytes: MiB, trimmer });
    budget.tryTake(8 * MiB);
    budget.release(8 * MiB);
    trimmer.calls.length = 0;
    expect(budget.tryTake(SMALL_CALL_BYTES)).toBe(true);
    expect(trimmer.calls).toEqual([]);
    expect(budget.tryTake(SMALL_CALL_BYTES + 1)).toBe(true);
    expect(trimmer.calls).toEqual(["cancel"]);
  });

  test("a large message granted after waiting cancels the trim too", async () => {
    const trimmer = recordingTrimmer();
    const limit = 16 * MiB * HELD_COPIES;
    const budget = new InflightBudget(limit, 5_000, undefined, { afterBytes: MiB, trimmer });
    budget.tryTake(16 * MiB);
    const waiting = budget.take(8 * MiB, "request");
    trimmer.calls.length = 0;
    budget.release(16 * MiB);
    await waiting;
    expect(trimmer.calls).toEqual(["cancel"]);
  });
});

describe("the idle memory trim waits for an idle moment (issue 11: a forced full collection is a 10-40 ms pause of every call in flight or arriving)", () => {
  const MiB = 1024 * 1024;
  // The trimmer's timers and clock are faked, so that a busy test machine cannot stretch a window.
  beforeEach(() => void vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] }));
  afterEach(() => void vi.useRealTimers());
  const pass = (ms: number) => vi.advanceTimersByTimeAsync(ms);

  /** A real budget with a real trimmer whose collector records when it ran (performance.now()), after one 64 MiB call has come and gone. */
  function afterBurst() {
    const collections: number[] = [];
    const budget = new InflightBudget(1024 * MiB, 100, undefined, { afterBytes: MiB, trimmer: memoryTrimmer(() => void collections.push(performance.now())) });
    expect(budget.tryTake(64 * MiB)).toBe(true);
    budget.release(64 * MiB);
    return { budget, collections, emptied: performance.now() };
  }

  test("an idle process collects once, TRIM_DELAY_MS after the burst, and lets the spare memory go", async () => {
    sparePayloadMemory.giveBack(sparePayloadMemory.take(1024).buffer);
    expect(sparePayloadMemory.heldBytes).toBeGreaterThan(0);
    const { collections, emptied } = afterBurst();
    await pass(TRIM_DELAY_MS - 1);
    expect(collections).toHaveLength(0);
    await pass(1);
    expect(collections).toEqual([emptied + TRIM_DELAY_MS]);
    expect(sparePayloadMemory.heldBytes).toBe(0);
    await pass(10 * IDLE_WINDOW_MS);
    expect(collections).toHaveLength(1);
  });

  test("a call in flight holds the collection back until it ends and a window passes without calls; the spare memory goes at TRIM_DELAY_MS all the same", async () => {
    const { budget, collections } = afterBurst();
    spareRequestMemory.giveBack(spareRequestMemory.take(1024).buffer);
    expect(spareRequestMemory.heldBytes).toBeGreaterThan(0);
    expect(budget.tryTake(100)).toBe(true);
    await pass(TRIM_DELAY_MS);
    expect(spareRequestMemory.heldBytes).toBe(0);
    await pass(10 * IDLE_WINDOW_MS);
    expect(collections).toHaveLength(0);
    budget.release(100);
    await pass(IDLE_WINDOW_MS);
    expect(collections).toHaveLength(1);
  });

  test("small calls arriving every 20 ms, each over in 2 ms, hold it back until they stop; it runs a whole window after the last", async () => {
    const { budget, collections } = afterBurst();
    let lastCall = 0;
    for (let t = 0; t < TRIM_DELAY_MS + 10 * IDLE_WINDOW_MS; t += 20) {
      expect(budget.tryTake(100)).toBe(true);
      lastCall = performance.now();
      await pass(2);
      budget.release(100);
      await pass(18);
    }
    expect(collections).toHaveLength(0);
    await pass(2 * IDLE_WINDOW_MS);
    expect(collections).toHaveLength(1);
    expect(collections[0]! - lastCall).toBeGreaterThanOrEqual(IDLE_WINDOW_MS);
  });

  test("a process never idle collects anyway TRIM_WAIT_LIMIT_MS after the first look, once", async () => {
    const { budget, collections, emptied } = afterBurst();
    for (let t = 0; t < TRIM_DELAY_MS + TRIM_WAIT_LIMIT_MS + 10 * IDLE_WINDOW_MS; t += 20) {
      expect(budget.tryTake(100)).toBe(true);
      await pass(2);
      budget.release(100);
      await pass(18);
    }
    expect(collections).toHaveLength(1);
    expect(collections[0]! - emptied).toBeGreaterThanOrEqual(TRIM_DELAY_MS + TRIM_WAIT_LIMIT_MS);
    expect(collections[0]! - emptied).toBeLessThan(TRIM_DELAY_MS + TRIM_WAIT_LIMIT_MS + IDLE_WINDOW_MS);
  });

  test("a large call cancels it for good; the next burst's end schedules it again", async () => {
    const { budget, collections } = afterBurst();
    expect(budget.tryTake(8 * MiB)).toBe(true);
    await pass(TRIM_DELAY_MS + 10 * IDLE_WINDOW_MS);
    expect(collections).toHaveLength(0);
    budget.release(8 * MiB);
    await pass(TRIM_DELAY_MS);
    expect(collections).toHaveLength(1);
  });
});
