import { describe, expect, test, vi } from "vitest";
import { COLLECT_AFTER_MS, IDLE_WINDOW_MS, QUIET_MS, sharedMemoryReleaser } from "../../services/storage/shared-memory-release.js";

/**
 * The collections a worker thread runs to let go of shared memory
 * (shared-memory-release.ts), with a collector that records what it was
 * asked and when; issue 11: the SQLite writer's full collection waits for
 * a moment without writes, since every write waiting for the writer waits
 * for it.
 */
describe("shared-memory release: a young collection soon, a full one when the thread is idle (issue 11)", () => {
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

  function recorder() {
    const started = performance.now();
    const runs: Array<{ type: string | undefined; at: number }> = [];
    return { runs, collect: (o?: { type?: string }) => void runs.push({ type: o?.type, at: performance.now() - started }) };
  }
  const majors = (runs: Array<{ type: string | undefined }>) => runs.filter((r) => r.type === "major").length;

  test("without an activity count: one young collection after COLLECT_AFTER_MS, one full one QUIET_MS after the last call", async () => {
    const { runs, collect } = recorder();
    const release = sharedMemoryReleaser({ collect });
    release();
    release();
    await vi.waitFor(() => expect(majors(runs)).toBe(1), { timeout: 5_000, interval: 20 });
    expect(runs.map((r) => r.type)).toEqual(["minor", "major"]);
    expect(runs[0]!.at).toBeGreaterThanOrEqual(COLLECT_AFTER_MS - 5);
    expect(runs[1]!.at).toBeGreaterThanOrEqual(QUIET_MS - 5);
  });

  test("the full collection waits while the thread keeps working, and runs once a window passes without work", async () => {
    const { runs, collect } = recorder();
    let work = 0;
    const release = sharedMemoryReleaser({ activity: () => work, collect });
    release();
    const busyUntil = performance.now() + QUIET_MS + 4 * IDLE_WINDOW_MS;
    while (performance.now() < busyUntil) {
      work++;
      await sleep(20);
    }
    expect(majors(runs)).toBe(0);
    const stopped = performance.now();
    await vi.waitFor(() => expect(majors(runs)).toBe(1), { timeout: 5_000, interval: 20 });
    expect(performance.now() - stopped).toBeGreaterThanOrEqual(IDLE_WINDOW_MS - 5);
  });

  test("a thread that never rests collects anyway once the wait limit has passed", async () => {
    const { runs, collect } = recorder();
    let work = 0;
    const release = sharedMemoryReleaser({ activity: () => work, collect, waitLimitMs: QUIET_MS + 3 * IDLE_WINDOW_MS });
    release();
    const busyUntil = performance.now() + QUIET_MS + 10 * IDLE_WINDOW_MS;
    while (performance.now() < busyUntil && majors(runs) === 0) {
      work++;
      await sleep(20);
    }
    expect(majors(runs)).toBe(1);
  });
});
