/** `--help` of the program and of every command (no server needed). */
import { expect, test } from "vitest";
import { runCli } from "../helpers/cli.js";

// 29 node processes: a minute is not enough on a loaded two-core machine.
test("--help prints usage for the program and every command", { timeout: 180_000 }, async () => {
  const commands = [
    [],
    ["serve"],
    ["sessions"],
    ["sessions", "list"],
    ["sessions", "get"],
    ["sessions", "save"],
    ["sessions", "create"],
    ["sessions", "delete"],
    ["sessions", "lineage"],
    ["events", "read"],
    ["events", "tail"],
    ["events", "append"],
    ["leases", "acquire"],
    ["leases", "renew"],
    ["leases", "release"],
    ["schedules", "list"],
    ["schedules", "get"],
    ["schedules", "due"],
    ["schedules", "fires"],
    ["schedules", "enable"],
    ["schedules", "disable"],
    ["schedules", "delete"],
    ["health"],
    ["stats"],
    ["workload"],
  ];
  // Four at a time: two dozen node processes at once time out on a loaded two-core machine.
  const results: Awaited<ReturnType<typeof runCli>>[] = [];
  for (let i = 0; i < commands.length; i += 4) results.push(...(await Promise.all(commands.slice(i, i + 4).map((words) => runCli([...words, "--help"])))));
  for (const [i, r] of results.entries()) {
    expect(r.code, commands[i]!.join(" ")).toBe(0);
    expect(r.stdout).toContain(`Usage: mecatl-drivers ${commands[i]!.join(" ")}`.trimEnd());
  }
});
