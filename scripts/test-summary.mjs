// Prints vitest's totals as one plain line ("vitest: N passed, N failed, N skipped")
// from the JSON report vitest.config.ts writes, and fails when no test ran.
import { readFileSync } from "node:fs";

const report = JSON.parse(readFileSync(".vitest-tmp/results.json", "utf8"));
const skipped = report.numPendingTests + report.numTodoTests;
console.log(`vitest: ${report.numPassedTests} passed, ${report.numFailedTests} failed, ${skipped} skipped`);
if (report.numTotalTests === 0) {
  console.error("no test ran");
  process.exit(1);
}
