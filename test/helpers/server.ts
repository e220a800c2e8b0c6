import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";
import { existsSync } from "node:fs";

function projectRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, "package.json"))) dir = dirname(dir);
  return dir;
}

/**
 * Path of the built executable the tests and benchmarks run (`npm test`
 * builds first). Found from the project root, so this helper works both from
 * `test/helpers` (vitest) and from `dist/test/helpers` (benchmarks).
 */
export const MAIN = join(projectRoot(), "dist/services/server/main.js");

/** A `mecatl-drivers serve` process started by a test. */
export interface ServerProcess {
  /** gRPC address as `host:port` (or `unix:/path`). */
  address: string;
  /** Connect listener address, when `--connect-listen` was passed. */
  connectAddress?: string;
  metricsAddress?: string;
  proc: ChildProcess;
  /** Every stderr line so far (JSON logs and startup errors). */
  stderr: string[];
  /** SIGTERM and wait for exit; resolves to the exit code. */
  stop(): Promise<number | null>;
  /** SIGKILL and wait for exit. */
  kill(): Promise<void>;
}

/**
 * Spawns `node dist/services/server/main.js serve --listen 127.0.0.1:0 ...args`
 * (or another build's `main.js`, for benchmarks comparing two builds) and
 * waits for its `listening` log line, which carries the real port.
 *
 * @throws Error with the process's stderr when it exits before listening.
 */
export async function startServer(args: string[], options: { listen?: string; env?: NodeJS.ProcessEnv; main?: string } = {}): Promise<ServerProcess> {
  const proc = spawn(process.execPath, [options.main ?? MAIN, "serve", "--listen", options.listen ?? "127.0.0.1:0", "--log-level", "info", ...args], {
    stdio: ["ignore", "ignore", "pipe"],
    env: { ...process.env, ...options.env },
  });
  const stderr: string[] = [];
  let buffered = "";
  const listening = new Promise<{ address: string; connectAddress?: string; metricsAddress?: string }>((resolveListen, reject) => {
    proc.stderr!.setEncoding("utf8");
    proc.stderr!.on("data", (chunk: string) => {
      buffered += chunk;
      const lines = buffered.split("\n");
      buffered = lines.pop()!;
      for (const line of lines) {
        stderr.push(line);
        try {
          const entry = JSON.parse(line) as { msg?: string; address?: string; connectAddress?: string; metricsAddress?: string };
          if (entry.msg === "listening") resolveListen({ address: entry.address!, connectAddress: entry.connectAddress, metricsAddress: entry.metricsAddress });
        } catch {
          // not JSON: a startup error line
        }
      }
    });
    proc.once("exit", (code) => reject(new Error(`server exited with ${code} before listening:\n${[...stderr, buffered].join("\n")}`)));
  });
  const exited = new Promise<number | null>((r) => proc.once("exit", (code) => r(code)));
  const addresses = await listening;
  return {
    ...addresses,
    proc,
    stderr,
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGTERM");
      return exited;
    },
    async kill() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGKILL");
      await exited;
    },
  };
}

/**
 * Runs `mecatl-drivers serve ...args` expecting it to fail at start, with
 * `env` added to this process's environment.
 *
 * @returns the exit code and everything written to stderr.
 */
export function runServeExpectingFailure(args: string[], timeoutMs = 15_000, env: NodeJS.ProcessEnv = {}): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolveRun, reject) => {
    const proc = spawn(process.execPath, [MAIN, "serve", ...args], { stdio: ["ignore", "ignore", "pipe"], env: { ...process.env, ...env } });
    let stderr = "";
    proc.stderr!.setEncoding("utf8").on("data", (c: string) => (stderr += c));
    const timer = setTimeout(() => {
      proc.kill("SIGKILL");
      reject(new Error(`serve did not exit within ${timeoutMs} ms; stderr:\n${stderr}`));
    }, timeoutMs);
    proc.once("exit", (code) => {
      clearTimeout(timer);
      resolveRun({ code, stderr });
    });
  });
}
