import type { Command } from "commander";
import { EXIT_USAGE } from "./output.js";
import { sessionsCommand } from "./sessions.js";
import { eventsCommand } from "./events.js";
import { leasesCommand } from "./leases.js";
import { schedulesCommand } from "./schedules.js";
import { healthCommand } from "./health.js";
import { statsCommand } from "./stats.js";
import { copyCommand } from "./copy.js";
import { backupCommand } from "./backup.js";
import { workloadCommand } from "../workload/command.js";

/**
 * The operator commands of `mecatl-drivers` (sessions, events, leases,
 * schedules, health, each taking the harness's own driver flags; stats,
 * copy and backup, which open stores themselves) and the harness workload.
 */
export function operatorCommands(): Command[] {
  return [sessionsCommand(), eventsCommand(), leasesCommand(), schedulesCommand(), healthCommand(), statsCommand(), copyCommand(), backupCommand(), workloadCommand()].map(usageExitStatus);
}

/** Makes commander's own errors (unknown option, missing argument or flag) exit with status 2, as the commands' usage errors do; help still exits 0. */
function usageExitStatus(command: Command): Command {
  command.exitOverride((err) => process.exit(err.exitCode === 0 ? 0 : EXIT_USAGE));
  for (const sub of command.commands) usageExitStatus(sub);
  return command;
}
