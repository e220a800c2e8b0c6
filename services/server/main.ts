#!/usr/bin/env node
/**
 * The `mecatl-drivers` executable: `serve` runs the storage services; the
 * operator commands (sessions, events, leases, schedules, health) talk to a
 * running server through the clients.
 */
import { Command } from "commander";
import { serveCommand } from "./serve-command.js";

const program = new Command("mecatl-drivers")
  .description("remote storage driver services (mecatl.driver.v1) for the Mecatl agent harness")
  .showHelpAfterError()
  .addCommand(serveCommand());
// `serve` needs none of the clients, CLI or workload code: load it only for
// the other commands (and top-level help), keeping the server's start-up lean.
if (process.argv[2] !== "serve") {
  const { operatorCommands } = await import("../../clients/cli/index.js");
  for (const command of operatorCommands()) program.addCommand(command);
}

await program.parseAsync(process.argv);
