import type { TestContext } from "vitest";

/**
 * True when the suite runs under CI (`CI` set to anything but empty, `0` or
 * `false`; `.ci/run` is started as `CI=true bash .ci/run`).
 */
export function underCi(): boolean {
  const ci = process.env.CI;
  return ci !== undefined && ci !== "" && ci !== "0" && ci.toLowerCase() !== "false";
}

/**
 * What a test does when this machine lacks something it needs (root for a
 * tmpfs, `strace` and ptrace for a syscall trace): locally it skips with
 * `reason`; under CI ({@link underCi}) it fails, because CI installs and
 * grants all of it and a required proof must not silently vanish there
 * (issue 15). `MECATL_PREREQUISITES=skip` makes it skip even then:
 * `npm run mutants` sets it, so that a test that cannot run leaves its
 * mutant SURVIVED rather than caught by the missing prerequisite.
 *
 * @throws Error saying what is missing, under CI.
 */
export function missingPrerequisite(ctx: TestContext, reason: string): void {
  if (underCi() && process.env.MECATL_PREREQUISITES !== "skip") throw new Error(`${reason}. Under CI (CI=${process.env.CI}) this test must run, so it fails instead of skipping`);
  ctx.skip(reason);
}
