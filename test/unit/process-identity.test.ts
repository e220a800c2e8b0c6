import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { afterEach, describe, expect, test, vi } from "vitest";
import { processAlive, processIdentity } from "../../services/storage/process-identity.js";

/** The state letter of `/proc/<pid>/stat` (R, S, Z, ...), or undefined once the pid is gone. */
function stateOf(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0];
  } catch {
    return undefined;
  }
}

/**
 * Who owns staged snapshot chunks (issue 11, sqlite-blobs.ts): a later
 * process removes the stages of an owner that is gone. Found by a
 * fresh-eyes run: a server restarted at once after `kill -9` found its
 * predecessor still a zombie (exited, not yet reaped), took it for alive,
 * and kept ~58 MiB of its abandoned chunks until a later restart.
 */
describe("process identity (owners of staged chunks)", () => {
  const started: Array<{ kill(): void }> = [];
  afterEach(() => {
    for (const p of started.splice(0)) p.kill();
  });

  test("this process is alive under its identity; a pid with another start time, or none, is gone", () => {
    const me = processIdentity();
    expect(me).toMatch(/^\d+:\d+$/);
    expect(processAlive(me)).toBe(true);
    expect(processAlive(`${process.pid}:1`)).toBe(false);
    expect(processAlive("0:1")).toBe(false);
    expect(processAlive("not-a-pid")).toBe(false);
  });

  test("a process that exited but was not reaped (a zombie) is gone", async () => {
    // The subshell exits only once its parent has become `sleep`, which never
    // reaps it. (Exiting at once raced with bash: a child that ended before
    // the exec was reaped by bash, and no zombie was left on a loaded CI host.)
    const script = '(while [ "$(cat /proc/$$/comm)" != sleep ]; do sleep 0.01; done) & echo $!; exec sleep 30';
    const parent = spawn("bash", ["-c", script], { stdio: ["ignore", "pipe", "ignore"] });
    started.push(parent);
    const zombie = Number(await new Promise<string>((resolve) => parent.stdout!.once("data", (d: Buffer) => resolve(d.toString().trim()))));
    await vi.waitFor(() => expect(stateOf(zombie)).toBe("Z"), { timeout: 10_000 });
    const identity = processIdentity(zombie);
    expect(identity).toMatch(new RegExp(`^${zombie}:\\d+$`));
    expect(processAlive(identity)).toBe(false);
    expect(processAlive(processIdentity(parent.pid!))).toBe(true);
  });
});
