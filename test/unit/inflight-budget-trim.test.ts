import { describe, expect, test } from "vitest";
import { HELD_COPIES, InflightBudget, SMALL_CALL_BYTES } from "../../services/server/inflight-budget.js";
import type { MemoryTrimmer } from "../../services/server/memory-trim.js";

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
