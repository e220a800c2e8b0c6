import type { Command } from "commander";
import { EXIT_USAGE } from "./output.js";

/**
 * The operator commands of `mecatl-drivers` by name (sessions, events,
 * leases, schedules, health, each taking the harness's own driver flags;
 * stats, copy and backup, which open stores themselves; and the harness
 * workload), in the order help lists them. Each entry imports its module
 * when called, so a command loads only its own code: `sessions list` does
 * not load the stores that `copy` opens.
 */
export const OPERATOR_COMMANDS: ReadonlyArray<readonly [name: string, load: () => Promise<Command>]> = [
  ["sessions", async () => usageExitStatus((await import("./sessions.js")).sessionsCommand())],
  ["events", async () => usageExitStatus((await import("./events.js")).eventsCommand())],
  ["leases", async () => usageExitStatus((await import("./leases.js")).leasesCommand())],
  ["schedules", async () => usageExitStatus((await import("./schedules.js")).schedulesCommand())],
  ["health", async () => usageExitStatus((await import("./health.js")).healthCommand())],
  ["stats", async () => usageExitStatus((await import("./stats.js")).statsCommand())],
  ["copy", async () => usageExitStatus((await import("./copy.js")).copyCommand())],
  ["backup", async () => usageExitStatus((await import("./backup.js")).backupCommand())],
  ["workload", async () => usageExitStatus((await import("../workload/command.js")).workloadCommand())],
];

/** Makes commander's own errors (unknown option, missing argument or flag) exit with status 2, as the commands' usage errors do; help still exits 0. */
function usageExitStatus(command: Command): Command {
  command.exitOverride((err) => process.exit(err.exitCode === 0 ? 0 : EXIT_USAGE));
  for (const sub of command.commands) usageExitStatus(sub);
  return command;
}
