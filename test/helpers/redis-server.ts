import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis, type RedisOptions } from "ioredis";
import { freePort, waitFor } from "./wait.js";

/** A `redis-server` process owned by one test file. */
export interface SpawnedRedis {
  /** Process id of the running redis-server (changes on {@link restart}). */
  readonly pid: number;
  port: number;
  url: string;
  dir: string;
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
 * fresh connection every 25 ms for up to 10 s.
 *
 * @throws Error naming `what` when it does not.
 */
export function waitForPong(options: RedisOptions, what: string): Promise<void> {
  return waitFor(async () => {
    const probe = new Redis({ ...options, lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 });
    probe.on("error", () => undefined);
    try {
      await probe.connect();
      return (await probe.ping()) === "PONG";
    } catch {
      return false;
    } finally {
      probe.disconnect();
    }
  }, 10_000, what);
}

/**
 * Spawns a real `redis-server` on a free port with its own directory. By
 * default it is durable (`appendonly yes`, `appendfsync always`), as the
 * driver requires; pass `durable: false` to test the refusal.
 */
export async function spawnRedis(options: { durable?: boolean; password?: string; tls?: { cert: string; key: string; ca: string } } = {}): Promise<SpawnedRedis> {
  const dir = mkdtempSync(join(tmpdir(), "mecatl-redis-"));
  const port = await freePort();
  const durable = options.durable ?? true;
  const args = ["--port", String(port), "--bind", "127.0.0.1", "--dir", dir, "--save", "", "--appendonly", durable ? "yes" : "no", "--appendfsync", durable ? "always" : "everysec", "--protected-mode", "no", "--loglevel", "warning"];
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
  const start = async () => {
    proc = spawn("redis-server", args, { stdio: "ignore" });
    await waitForPong(probeOptions, "redis-server to accept connections");
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
    port,
    url: `redis://127.0.0.1:${port}`,
    dir,
    kill,
    restart: start,
    async stop() {
      await kill();
      rmSync(dir, { recursive: true, force: true });
    },
    client: () => new Redis(probeOptions),
  };
}
