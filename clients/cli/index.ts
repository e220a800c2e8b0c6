import type { Command } from "commander";
import { sessionsCommand } from "./sessions.js";
import { eventsCommand } from "./events.js";
import { leasesCommand } from "./leases.js";
import { schedulesCommand } from "./schedules.js";
import { healthCommand } from "./health.js";
import { workloadCommand } from "../workload/command.js";

/**
 * The operator commands of `mecatl-drivers` (sessions, events, leases,
 * schedules, health) and the harness workload, each taking the harness's own
 * driver flags.
 */
export function operatorCommands(): Command[] {
  return [sessionsCommand(), eventsCommand(), leasesCommand(), schedulesCommand(), healthCommand(), workloadCommand()];
}
