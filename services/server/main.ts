#!/usr/bin/env node
/**
 * The `mecatl-drivers` executable: `serve` runs the storage services; the
 * operator commands (sessions, events, leases, schedules, health, ...) talk
 * to a running server through the clients or open stores themselves.
 *
 * A command named on the command line is the only one loaded (each pulls in
 * different libraries: the stores, the gRPC server, the clients), so an
 * operator command starts in a fraction of the time `serve` takes to load;
 * help, `help <command>` and unknown commands load them all.
 */
import { Command } from "commander";
import { OPERATOR_COMMANDS } from "../../clients/cli/index.js";
import { endQuietlyWhenStdoutCloses } from "../../clients/cli/output.js";

const COMMANDS: ReadonlyArray<readonly [string, () => Promise<Command>]> = [["serve", async () => (await import("./serve-command.js")).serveCommand()], ...OPERATOR_COMMANDS];

const program = new Command("mecatl-drivers").description("remote storage driver services (mecatl.driver.v1) for the Mecatl agent harness").showHelpAfterError();
const named = COMMANDS.find(([name]) => name === process.argv[2]);
endQuietlyWhenStdoutCloses();
for (const [, load] of named === undefined ? COMMANDS : [named]) program.addCommand(await load());

await program.parseAsync(process.argv);
