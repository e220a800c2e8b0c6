import { defineConfig } from "vitest/config";
import { BaseSequencer, type TestSpecification } from "vitest/node";

/**
 * Test files that take minutes, started first so that none of them is left
 * to run alone at the end. On a fresh clone (CI) vitest has no timings yet
 * and orders files by size, which puts small files that run long (the two
 * halves of answer-limits) last.
 */
const SLOW_FIRST = [
  "test/conformance/answer-limits-redis.test.ts",
  "test/conformance/answer-limits-sqlite.test.ts",
  "test/cli/cli.test.ts",
  "test/copy/copy.test.ts",
  "test/copy/copy-guards.test.ts",
  "test/conformance/event-log.test.ts",
  "test/faults/kill-cycles.test.ts",
];

/** Vitest's own order, with {@link SLOW_FIRST} moved to the front. */
class SlowFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const rank = (f: TestSpecification) => {
      const i = SLOW_FIRST.findIndex((p) => f.moduleId.endsWith(p));
      return i < 0 ? SLOW_FIRST.length : i;
    };
    const sorted = await super.sort(files);
    return sorted.map((f, i) => ({ f, i })).sort((a, b) => rank(a.f) - rank(b.f) || a.i - b.i).map(({ f }) => f);
  }
}

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks",
    // Three test files at a time on the 2-core CI machine: much of a fault test's time is spent
    // waiting (failovers, TTLs, deadlines). Measured on 2026-12-02: 731 s with 2 workers on an
    // idle machine, 633 s with 3, and 737 s with 3 while a busy loop took one core; every test passed.
    maxWorkers: 3,
    sequence: { sequencer: SlowFirstSequencer },
    reporters: ["default", ["json", { outputFile: ".vitest-tmp/results.json" }]],
  },
});
