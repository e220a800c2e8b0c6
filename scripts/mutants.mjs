// The project's mutation check (issue 15): applies each one-line bug listed in
// test/mutants/*.json to a scratch copy of the project, builds it, runs only
// the test files that must catch it, and fails if any bug survives. Prints a
// table of the results.
//
//   npm run mutants                      every mutant
//   npm run mutants -- ID [ID...]        only these (ids are the file names)
//   npm run mutants -- --list            print the list and check it applies, run nothing
//   npm run mutants -- --baseline        first run every listed test file on the
//                                        unmutated copy (a test already failing would
//                                        make a mutant look caught)
//   npm run mutants -- --keep            keep the scratch copy (its path is printed)
//
// A mutant file holds: id, rule (what the bug breaks, with its source), origin,
// file (relative to the project root), original (text that must occur exactly
// once in that file), replacement, and tests (test files, at least one of which
// must fail). See test/mutants/README.md.
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import Table from "cli-table3";

const root = process.cwd();
const listDir = join(root, "test/mutants");
const args = process.argv.slice(2);
const flags = new Set(args.filter((a) => a.startsWith("--")));
const only = args.filter((a) => !a.startsWith("--"));
/** Longest a mutant's test run may take before it counts as caught by a hang (ms). */
const RUN_TIMEOUT_MS = 10 * 60 * 1000;

function fail(message) {
  console.error(message);
  process.exit(2);
}

function loadMutants() {
  const mutants = readdirSync(listDir)
    .filter((f) => f.endsWith(".json"))
    .sort()
    .map((f) => ({ ...JSON.parse(readFileSync(join(listDir, f), "utf8")), source: `test/mutants/${f}` }));
  for (const m of mutants) {
    for (const key of ["id", "rule", "file", "original"]) {
      if (typeof m[key] !== "string" || m[key] === "") fail(`${m.source}: "${key}" must be a non-empty string`);
    }
    if (typeof m.replacement !== "string" || m.replacement === m.original) fail(`${m.source}: "replacement" must be a string other than "original" (empty deletes it)`);
    if (`test/mutants/${m.id}.json` !== m.source) fail(`${m.source}: id must match the file name`);
    if (!Array.isArray(m.tests) || m.tests.length === 0) fail(`${m.source}: "tests" must list at least one test file`);
    for (const t of m.tests) if (!existsSync(join(root, t))) fail(`${m.source}: test file ${t} does not exist`);
    if (!existsSync(join(root, m.file))) fail(`${m.source}: ${m.file} does not exist`);
    const count = readFileSync(join(root, m.file), "utf8").split(m.original).length - 1;
    // Stale after a change to the code it mutates: the entry must be updated, not skipped.
    if (count !== 1) fail(`${m.source}: the original text occurs ${count} times in ${m.file} (must be exactly once); update the mutant`);
  }
  const unknown = only.filter((id) => !mutants.some((m) => m.id === id));
  if (unknown.length > 0) fail(`unknown mutant(s): ${unknown.join(", ")}`);
  return only.length === 0 ? mutants : mutants.filter((m) => only.includes(m.id));
}

/** Copies the project (not node_modules, dist, .git) to a scratch directory; node_modules is linked. */
function scratchCopy() {
  const dir = mkdtempSync(join(tmpdir(), "mecatl-mutants-"));
  const skip = new Set(["node_modules", "dist", ".git", ".vitest-tmp"]);
  for (const entry of readdirSync(root)) {
    if (!skip.has(entry) && !entry.startsWith("tsconfig.tests-tmp")) cpSync(join(root, entry), join(dir, entry), { recursive: true });
  }
  symlinkSync(join(root, "node_modules"), join(dir, "node_modules"), "dir");
  return dir;
}

function run(dir, command, commandArgs, timeout) {
  const started = Date.now();
  const r = spawnSync(command, commandArgs, { cwd: dir, encoding: "utf8", timeout, maxBuffer: 64 << 20, env: { ...process.env, CI: "1", MECATL_PREREQUISITES: "skip" } });
  return { status: r.status, signal: r.signal, output: `${r.stdout ?? ""}${r.stderr ?? ""}`, seconds: (Date.now() - started) / 1000 };
}

function build(dir) {
  // Incremental: after the first build only the mutated file (and its dependents) is compiled again.
  return run(dir, join(dir, "node_modules/.bin/tsc"), ["-p", "tsconfig.json", "--incremental", "--tsBuildInfoFile", join(dir, ".tsbuildinfo")], RUN_TIMEOUT_MS);
}

/** Runs `tests` in the scratch copy; returns the outcome and the names of failed tests. */
function runTests(dir, tests, bail) {
  // Where vitest.config.ts has the json reporter write.
  const report = join(dir, ".vitest-tmp/results.json");
  rmSync(report, { force: true });
  const r = run(dir, join(dir, "node_modules/.bin/vitest"), ["run", ...tests, ...(bail ? ["--bail=1"] : [])], RUN_TIMEOUT_MS);
  let failed = [];
  if (existsSync(report)) {
    const json = JSON.parse(readFileSync(report, "utf8"));
    failed = json.testResults.flatMap((f) => f.assertionResults.filter((a) => a.status === "failed").map((a) => `${relative(dir, f.name)}: ${a.title}`));
    // A file that failed outside any test (an error in a hook, say) has no failed assertion.
    if (failed.length === 0) failed = json.testResults.filter((f) => f.status === "failed").map((f) => `${relative(dir, f.name)}: ${f.message.split("\n")[0]}`);
  }
  return { ...r, failed, timedOut: r.signal !== null };
}

const mutants = loadMutants();
if (flags.has("--list")) {
  for (const m of mutants) console.log(`${m.id}\t${m.file}\t${m.tests.join(" ")}\n  ${m.rule}`);
  console.log(`${mutants.length} mutants; each applies to exactly one place`);
  process.exit(0);
}

const dir = scratchCopy();
console.log(`scratch copy: ${dir}`);
try {
  const base = build(dir);
  if (base.status !== 0) throw new Error(`the unmutated project does not build:\n${base.output}`);
  if (flags.has("--baseline")) {
    const files = [...new Set(mutants.flatMap((m) => m.tests))];
    console.log(`baseline: running ${files.length} test files on the unmutated copy`);
    const r = runTests(dir, files, false);
    if (r.status !== 0) throw new Error(`the listed tests fail without any mutant, so no result would mean anything:\n${r.failed.join("\n") || r.output.slice(-4000)}`);
    console.log(`baseline passed in ${r.seconds.toFixed(0)} s`);
  }
  const results = [];
  for (const m of mutants) {
    const path = join(dir, m.file);
    const original = readFileSync(path, "utf8");
    writeFileSync(path, original.replace(m.original, () => m.replacement));
    try {
      process.stdout.write(`${m.id}: `);
      const b = build(dir);
      if (b.status !== 0) {
        results.push({ m, result: "DOES NOT BUILD", seconds: b.seconds, detail: b.output.split("\n").find((l) => l.includes("error")) ?? "" });
      } else {
        const r = runTests(dir, m.tests, true);
        const caught = r.status !== 0 && (r.failed.length > 0 || r.timedOut);
        results.push({ m, result: caught ? "caught" : r.status === 0 ? "SURVIVED" : "NO VERDICT", seconds: b.seconds + r.seconds, detail: r.timedOut ? "test run timed out" : (r.failed[0] ?? (r.status === 0 ? "" : r.output.slice(-300))) });
      }
      console.log(results.at(-1).result);
    } finally {
      writeFileSync(path, original);
    }
  }
  const table = new Table({
    head: ["mutant", "where", "tests", "result", "s", "first failing test"],
    colWidths: [34, 40, 42, 10, 5, 60],
    wordWrap: true,
    wrapOnWordBoundary: false,
    style: { head: [], border: [] },
  });
  for (const { m, result, seconds, detail } of results) table.push([m.id, m.file, m.tests.map((t) => t.replace(/^test\//, "")).join("\n"), result, seconds.toFixed(0), detail]);
  console.log(table.toString());
  const bad = results.filter((r) => r.result !== "caught");
  console.log(`${results.length - bad.length} of ${results.length} mutants caught`);
  process.exitCode = bad.length === 0 ? 0 : 1;
} catch (err) {
  console.error(err.message);
  process.exitCode = 2;
} finally {
  if (flags.has("--keep")) console.log(`kept ${dir}`);
  else rmSync(dir, { recursive: true, force: true });
}
