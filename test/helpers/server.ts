import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";
import { existsSync } from "node:fs";
import { waitFor } from "./wait.js";

function projectRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, "package.json"))) dir = dirname(dir);
  return dir;
}

/** The project's root directory (where package.json is), from source or from `dist/`. */
export const PROJECT_ROOT = projectRoot();

/**
 * Path of the built executable the tests and benchmarks run (`npm test`
 * builds first). Found from the project root, so this helper works both from
 * `test/helpers` (vitest) and from `dist/test/helpers` (benchmarks).
 */
export const MAIN = join(PROJECT_ROOT, "dist/services/server/main.js");

/** A `mecatl-drivers serve` process started by a test. */
export interface ServerProcess {
  /** gRPC address as `host:port` (or `unix:/path`). */
  address: string;
  /** Connect listener address, when `--connect-listen` was passed. */
  connectAddress?: string;
  /** The health-only listener's address, when `--health-listen` was passed. */
  healthAddress?: string;
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
 * Keepalive flags every test server gets before the test's own arguments
 * (which override them: the last occurrence of a flag wins). A server drops
 * a connection whose peer leaves a ping unanswered for `--keepalive-timeout`,
 * and the client then sees the calls it had just sent end with INTERNAL
 * "NGHTTP2_REFUSED_STREAM". A test process stalled for 10 s (the default) by
 * a loaded CI machine is not a dead peer; the dead-peer tests set their own.
 */
const TEST_KEEPALIVE = ["--keepalive-timeout", "120s"];

/**
 * Spawns `node dist/services/server/main.js serve --listen 127.0.0.1:0
 * ...TEST_KEEPALIVE ...args` and waits for its `listening` log line, which
 * carries the real port. With `main`, another build's `main.js` runs instead
 * (benchmarks comparing two builds), without {@link TEST_KEEPALIVE}: older
 * builds do not know the flag.
 *
 * @throws Error with the process's stderr when it exits before listening.
 */
export async function startServer(args: string[], options: { listen?: string; env?: NodeJS.ProcessEnv; main?: string } = {}): Promise<ServerProcess> {
  const proc = spawn(process.execPath, [options.main ?? MAIN, "serve", "--listen", options.listen ?? "127.0.0.1:0", "--log-level", "info", ...(options.main === undefined ? TEST_KEEPALIVE : []), ...args], {
    stdio: ["ignore", "ignore", "pipe"],
    env: { ...process.env, ...options.env },
  });
  const stderr: string[] = [];
  let buffered = "";
  const listening = new Promise<{ address: string; connectAddress?: string; healthAddress?: string; metricsAddress?: string }>((resolveListen, reject) => {
    proc.stderr!.setEncoding("utf8");
    proc.stderr!.on("data", (chunk: string) => {
      buffered += chunk;
      const lines = buffered.split("\n");
      buffered = lines.pop()!;
      for (const line of lines) {
        stderr.push(line);
        try {
          const entry = JSON.parse(line) as { msg?: string; address?: string; connectAddress?: string; healthAddress?: string; metricsAddress?: string };
          if (entry.msg === "listening") resolveListen({ address: entry.address!, connectAddress: entry.connectAddress, healthAddress: entry.healthAddress, metricsAddress: entry.metricsAddress });
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

/** A parsed JSON log line of a test server and its index in {@link ServerProcess.stderr}. */
export interface LogEntry {
  index: number;
  entry: Record<string, unknown> & { msg?: string };
}

/** The server's JSON log lines whose `msg` is `msg`, from stderr line `from` on. */
export function logEntries(server: ServerProcess, msg: string, from = 0): LogEntry[] {
  const out: LogEntry[] = [];
  for (let index = from; index < server.stderr.length; index++) {
    try {
      const entry = JSON.parse(server.stderr[index]!) as LogEntry["entry"];
      if (entry.msg === msg) out.push({ index, entry });
    } catch {
      // not JSON
    }
  }
  return out;
}

/**
 * Waits for the server to log `msg` at or after stderr line `from` (pass
 * `server.stderr.length` taken before acting, to wait for a new line): the
 * signal tests use instead of sleeping.
 *
 * @throws Error after `timeoutMs`.
 */
export async function waitForLog(server: ServerProcess, msg: string, options: { from?: number; timeoutMs?: number } = {}): Promise<LogEntry> {
  let found: LogEntry | undefined;
  await waitFor(() => (found = logEntries(server, msg, options.from)[0]) !== undefined, options.timeoutMs ?? 10_000, `the server to log ${JSON.stringify(msg)}`);
  return found!;
}

/**
 * The text of stderr as an operator at a terminal would read it: each JSON
 * startup refusal line (services/server/startup-refusal.ts; stderr is a pipe
 * here) becomes `mecatl-drivers: <msg>`; other lines stay as they are.
 */
function refusalText(stderr: string): string {
  return stderr.replace(/^\{.*\}$/gm, (line) => {
    const entry = JSON.parse(line) as { level?: number; exitCode?: number; msg?: string };
    return entry.level === 60 && entry.exitCode === 2 && typeof entry.msg === "string" ? `mecatl-drivers: ${entry.msg}` : line;
  });
}

/**
 * Runs `mecatl-drivers serve ...args` expecting it to fail at start, with
 * `env` added to this process's environment.
 *
 * @returns the exit code, stderr with each JSON refusal line read as its
 *   terminal text (`mecatl-drivers: <msg>`, see {@link refusalText}), and
 *   `raw`, stderr exactly as written.
 */
export function runServeExpectingFailure(args: string[], timeoutMs = 15_000, env: NodeJS.ProcessEnv = {}): Promise<{ code: number | null; stderr: string; raw: string }> {
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
      resolveRun({ code, stderr: refusalText(stderr), raw: stderr });
    });
  });
}
