import { spawn, type ChildProcess } from "node:child_process";
import { MAIN } from "./server.js";

/** What a finished `mecatl-drivers` command printed and its exit status. */
export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs `node dist/services/server/main.js ...args` to completion. The
 * environment is the test's, minus `MECATL_DRIVER_AUTH_TOKEN` and
 * `MECATL_DRIVERS_TARGET`, plus `env`.
 *
 * @throws Error with the output so far when it runs past `timeoutMs`.
 */
export function runCli(args: string[], options: { env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}): Promise<CliResult> {
  const proc = spawnCli(args, options.env);
  return finished(proc, options.timeoutMs ?? 30_000);
}

/** Starts a command without waiting for it (e.g. a follow to interrupt later). */
export function spawnCli(args: string[], env: NodeJS.ProcessEnv = {}): ChildProcess & { out: { stdout: string; stderr: string } } {
  const base = { ...process.env };
  delete base.MECATL_DRIVER_AUTH_TOKEN;
  delete base.MECATL_DRIVERS_TARGET;
  const proc = spawn(process.execPath, [MAIN, ...args], { stdio: ["ignore", "pipe", "pipe"], env: { ...base, ...env } }) as ChildProcess & { out: { stdout: string; stderr: string } };
  proc.out = { stdout: "", stderr: "" };
  proc.stdout!.setEncoding("utf8").on("data", (c: string) => (proc.out.stdout += c));
  proc.stderr!.setEncoding("utf8").on("data", (c: string) => (proc.out.stderr += c));
  return proc;
}

/** Waits for a spawned command to exit. @throws Error with its output after `timeoutMs`. */
export function finished(proc: ChildProcess & { out: { stdout: string; stderr: string } }, timeoutMs = 30_000): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.kill("SIGKILL");
      reject(new Error(`command did not exit within ${timeoutMs} ms\nstdout:\n${proc.out.stdout}\nstderr:\n${proc.out.stderr}`));
    }, timeoutMs);
    proc.once("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout: proc.out.stdout, stderr: proc.out.stderr });
    });
  });
}
