import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis, type RedisOptions } from "ioredis";
import { freeLowPort, waitFor } from "./wait.js";

/**
 * A port for a test redis-server, below the kernel's ephemeral range: a
 * killed redis-server is restarted on its port, and no other test's
 * `freePort()` or outgoing connection can take that port meanwhile.
 */
const redisPort = () => freeLowPort(23000, 26999);

/** A `redis-server` process owned by one test file. */
export interface SpawnedRedis {
  /** Process id of the running redis-server (changes on {@link restart}). */
  readonly pid: number;
  port: number;
  url: string;
  dir: string;
  /** The exit code of the current process once it has exited by itself, else null (running, or killed by a signal). */
  readonly exitCode: number | null;
  /** What the current process wrote to stdout and stderr so far (its log, `--loglevel warning`). */
  log(): string;
  /** Kills the process with SIGKILL (keeps the data directory). */
  kill(): Promise<void>;
  /** Starts the server again on the same port and directory. */
  restart(): Promise<void>;
  /** Kills the server and removes its directory. */
  stop(): Promise<void>;
  /** A fresh ioredis client for direct inspection (caller quits it). */
  client(): Redis;
}

/**
 * Waits until a Redis server reached with `options` answers PING, trying a
 * fresh connection every 25 ms for up to 10 s; with `spawned`, until the
 * answer comes from that process (its `process_id`), failing at once if it
 * exited.
 *
 * @throws Error naming `what` when it does not.
 */
export function waitForPong(options: RedisOptions, what: string, spawned?: { proc: ChildProcess; output: () => string }): Promise<void> {
  return waitFor(async () => {
    // A redis-server that could not bind its port exits; whatever answers on the port then is
    // another test's process, and the test must fail here rather than use it.
    if (spawned !== undefined && (spawned.proc.exitCode !== null || spawned.proc.signalCode !== null)) {
      throw new Error(`${what}: redis-server exited (${spawned.proc.exitCode ?? spawned.proc.signalCode}): ${spawned.output().trim()}`);
    }
    const probe = new Redis({ ...options, lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 });
    probe.on("error", () => undefined);
    try {
      await probe.connect();
      if (spawned === undefined) return (await probe.ping()) === "PONG";
      // The answer must come from the process just spawned, not from one that holds the port.
      return /^process_id:(\d+)\r?$/m.exec(await probe.info("server"))?.[1] === String(spawned.proc.pid);
    } catch {
      return false;
    } finally {
      probe.disconnect();
    }
  }, 10_000, what);
}

/**
 * Spawns a real `redis-server` on a free port with its own directory (made
 * under `parent`, default the system's temporary directory: a small tmpfs
 * to fill, say). By default it is durable (`appendonly yes`, `appendfsync
 * always`), as the driver requires; pass `durable: false` to test the
 * refusal (`appendonly no`), or `appendfsync: "everysec"` for an AOF synced
 * once a second (what `--redis-durability=relaxed` accepts).
 */
export async function spawnRedis(
  options: { durable?: boolean; appendfsync?: "always" | "everysec"; parent?: string; password?: string; tls?: { cert: string; key: string; ca: string } } = {},
): Promise<SpawnedRedis> {
  const dir = mkdtempSync(join(options.parent ?? tmpdir(), "mecatl-redis-"));
  const port = await redisPort();
  const durable = options.durable ?? true;
  const appendfsync = options.appendfsync ?? (durable ? "always" : "everysec");
  const args = ["--port", String(port), "--bind", "127.0.0.1", "--dir", dir, "--save", "", "--appendonly", durable ? "yes" : "no", "--appendfsync", appendfsync, "--protected-mode", "no", "--loglevel", "warning"];
  if (options.password !== undefined) args.push("--requirepass", options.password);
  if (options.tls !== undefined) {
    // TLS only: the plain port is closed and the TLS port takes its number.
    args.splice(args.indexOf("--port"), 2, "--port", "0", "--tls-port", String(port));
    args.push("--tls-cert-file", options.tls.cert, "--tls-key-file", options.tls.key, "--tls-ca-cert-file", options.tls.ca, "--tls-auth-clients", "no");
  }
  const probeOptions = {
    port,
    host: "127.0.0.1",
    password: options.password,
    tls: options.tls === undefined ? undefined : { ca: readFileSync(options.tls.ca), servername: "localhost" },
  };
  let proc: ChildProcess;
  let output = "";
  const start = async () => {
    const started = spawn("redis-server", args, { stdio: ["ignore", "pipe", "pipe"] });
    proc = started;
    output = "";
    for (const stream of [started.stdout!, started.stderr!]) {
      stream.setEncoding("utf8");
      stream.on("data", (chunk: string) => (output += chunk));
    }
    await waitForPong(probeOptions, `redis-server (pid ${started.pid}) to accept connections on port ${port}`, { proc: started, output: () => output });
  };
  const kill = async () => {
    if (proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise((r) => proc.once("exit", r));
    proc.kill("SIGKILL");
    await exited;
  };
  await start();
  return {
    get pid() {
      return proc.pid!;
    },
    get exitCode() {
      return proc.exitCode;
    },
    log: () => output,
    port,
    url: `redis://127.0.0.1:${port}`,
    dir,
    kill,
    restart: start,
    async stop() {
      await kill();
      // A child redis-server forked for an AOF rewrite outlives its killed parent for a moment and
      // may still write its temporary file here (ENOTEMPTY seen on this project's VMs): retry.
      rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 50 });
    },
    client: () => new Redis(probeOptions),
  };
}
