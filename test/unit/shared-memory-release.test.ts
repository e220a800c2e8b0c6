import { afterEach, beforeEach, describe, expect, test, vi } from "vitest";
import { COLLECT_AFTER_MS, IDLE_WINDOW_MS, QUIET_MS, sharedMemoryReleaser } from "../../services/storage/shared-memory-release.js";

/**
 * The collections a worker thread runs to let go of shared memory
 * (shared-memory-release.ts), with a collector that records what it was
 * asked and when; issue 11: the SQLite writer's full collection waits for
 * a moment without writes, since every write waiting for the writer waits
 * for it.
 */
describe("shared-memory release: a young collection soon, a full one when the thread is idle (issue 11)", () => {
  // Timers and clock faked, so that a busy test machine cannot stretch a window.
  beforeEach(() => void vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] }));
  afterEach(() => void vi.useRealTimers());
  const pass = (ms: number) => vi.advanceTimersByTimeAsync(ms);

  /** A collector that records each run's type and time (performance.now()). */
  function recorder() {
    const runs: Array<{ type: string | undefined; at: number }> = [];
    return { runs, collect: (o?: { type?: string }) => void runs.push({ type: o?.type, at: performance.now() }) };
  }
  const majors = (runs: Array<{ type: string | undefined }>) => runs.filter((r) => r.type === "major");

  test("without an activity count: one young collection COLLECT_AFTER_MS after the first call, one full one QUIET_MS after the last", async () => {
    const { runs, collect } = recorder();
    const release = sharedMemoryReleaser({ collect });
    const first = performance.now();
    release();
    await pass(50);
    release();
    await pass(QUIET_MS + 10 * IDLE_WINDOW_MS);
    expect(runs).toEqual([
      { type: "minor", at: first + COLLECT_AFTER_MS },
      { type: "major", at: first + 50 + QUIET_MS },
    ]);
  });

  test("the full collection waits while the thread keeps working, and runs once a window passes without work", async () => {
    const { runs, collect } = recorder();
    let work = 0;
    const release = sharedMemoryReleaser({ activity: () => work, collect });
    release();
    let lastWork = 0;
    for (let t = 0; t < QUIET_MS + 10 * IDLE_WINDOW_MS; t += 20) {
      work++;
      lastWork = performance.now();
      await pass(20);
    }
    expect(majors(runs)).toHaveLength(0);
    await pass(2 * IDLE_WINDOW_MS);
    expect(majors(runs)).toHaveLength(1);
    expect(majors(runs)[0]!.at - lastWork).toBeGreaterThanOrEqual(IDLE_WINDOW_MS);
  });

  test("a thread that never rests collects anyway once the wait limit has passed", async () => {
    const { runs, collect } = recorder();
    let work = 0;
    const limit = QUIET_MS + 5 * IDLE_WINDOW_MS;
    const release = sharedMemoryReleaser({ activity: () => work, collect, waitLimitMs: limit });
    const first = performance.now();
    release();
    for (let t = 0; t < limit + 10 * IDLE_WINDOW_MS; t += 20) {
      work++;
      await pass(20);
    }
    expect(majors(runs)).toHaveLength(1);
    expect(majors(runs)[0]!.at - first).toBeGreaterThanOrEqual(limit);
    expect(majors(runs)[0]!.at - first).toBeLessThanOrEqual(limit + IDLE_WINDOW_MS);
  });
});
