#!/usr/bin/env node
/**
 * The `mecatl-drivers` executable: `serve` runs the storage services; the
 * operator commands (sessions, events, leases, schedules, health) talk to a
 * running server through the clients.
 */
import { Command } from "commander";
import { serveCommand } from "./serve-command.js";
import { operatorCommands } from "../../clients/cli/index.js";

const program = new Command("mecatl-drivers")
  .description("remote storage driver services (mecatl.driver.v1) for the Mecatl agent harness")
  .showHelpAfterError()
  .addCommand(serveCommand());
for (const command of operatorCommands()) program.addCommand(command);

await program.parseAsync(process.argv);
