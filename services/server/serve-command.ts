import { Command, Option, InvalidArgumentError } from "commander";
import ms from "ms";
import { startServer, type ServerOptions } from "./server.js";
import { SERVICE_NAMES, type ServiceName } from "./service-registry.js";
import { StartupError } from "../storage/redis-connection.js";
import { DEFAULT_STORE_TIMEOUT_MS } from "../storage/backend.js";
import { MAX_LEASE_TTL_MS } from "../session-lease/rules.js";
import { addStoreOptions, storeBackendOptions, type StoreFlags } from "./store-options.js";

/**
 * Parses a duration flag such as `30s`, `500ms` or `2m` into milliseconds.
 *
 * @throws InvalidArgumentError (commander prints it; `serve` exits 2) when the
 *   text is not a positive duration.
 */
export function parseDuration(text: string): number {
  const value = ms(text as ms.StringValue);
  if (typeof value !== "number" || !Number.isFinite(value) || value <= 0) {
    throw new InvalidArgumentError(`expected a positive duration such as 30s, 500ms or 2m, got ${JSON.stringify(text)}`);
  }
  return value;
}

/**
 * Parses a duration flag that may also be `0` (off), in milliseconds.
 *
 * @throws InvalidArgumentError when the text is neither `0` nor a positive duration.
 */
export function parseDurationOrZero(text: string): number {
  return text.trim() === "0" ? 0 : parseDuration(text);
}

/**
 * Parses `--lease-ttl`: a duration (see {@link parseDuration}) of at most
 * 365 days, so that expiry arithmetic stays exact (session-lease/rules.ts).
 *
 * @throws InvalidArgumentError when the text is not a duration in that range.
 */
export function parseLeaseTtl(text: string): number {
  const value = parseDuration(text);
  if (value > MAX_LEASE_TTL_MS) throw new InvalidArgumentError(`a lease TTL of at most 365d is supported, got ${JSON.stringify(text)}`);
  return value;
}

/**
 * Parses a positive integer flag.
 *
 * @throws InvalidArgumentError when the text is not a whole number ≥ 1.
 */
export function parsePositiveInt(text: string): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError(`expected a whole number of at least 1, got ${JSON.stringify(text)}`);
  return n;
}

function resolveServices(names: string[]): ServiceName[] {
  if (names.length === 0 || names.includes("all")) return [...SERVICE_NAMES];
  for (const n of names) {
    if (!(SERVICE_NAMES as readonly string[]).includes(n)) {
      throw new StartupError(`unknown service ${JSON.stringify(n)}; choose all or any of ${SERVICE_NAMES.join(", ")}`);
    }
  }
  return names as ServiceName[];
}

/** Flag values of `serve` as commander hands them over. */
interface ServeFlags extends StoreFlags {
  listen: string;
  connectListen?: string;
  insecureListen: boolean;
  leaseTtl: number;
  maxFollowers: number;
  followBuffer: number;
  tlsCert?: string;
  tlsKey?: string;
  tlsClientCa?: string;
  authTokenFile?: string;
  healthListen?: string;
  metricsListen?: string;
  metricsTlsCert?: string;
  metricsTlsKey?: string;
  metricsTlsClientCa?: string;
  storeSizeInterval: number;
  redisDurability: "strict" | "relaxed";
  shutdownGrace: number;
  storeTimeout: number;
  logLevel: string;
}

/**
 * Turns `serve` flags into {@link ServerOptions}.
 *
 * @throws StartupError for combinations no single flag parser can catch (a
 *   key without a certificate, an unknown service name).
 */
export function serveOptions(serviceArgs: string[], f: ServeFlags): ServerOptions {
  if ((f.tlsCert === undefined) !== (f.tlsKey === undefined)) throw new StartupError("--tls-cert and --tls-key go together; give both or neither");
  if (f.tlsClientCa !== undefined && f.tlsCert === undefined) throw new StartupError("--tls-client-ca needs --tls-cert and --tls-key");
  if ((f.metricsTlsCert === undefined) !== (f.metricsTlsKey === undefined)) throw new StartupError("--metrics-tls-cert and --metrics-tls-key go together; give both or neither");
  if (f.metricsTlsClientCa !== undefined && f.metricsTlsCert === undefined) throw new StartupError("--metrics-tls-client-ca needs --metrics-tls-cert and --metrics-tls-key");
  if (f.metricsTlsCert !== undefined && f.metricsListen === undefined) throw new StartupError("--metrics-tls-cert needs --metrics-listen");
  const store = storeBackendOptions(f);
  return {
    services: resolveServices(serviceArgs),
    listen: f.listen,
    connectListen: f.connectListen,
    insecureListen: f.insecureListen,
    tls: f.tlsCert === undefined ? undefined : { certFile: f.tlsCert, keyFile: f.tlsKey!, clientCaFile: f.tlsClientCa },
    authTokenFile: f.authTokenFile,
    healthListen: f.healthListen,
    metricsListen: f.metricsListen,
    metricsTls: f.metricsTlsCert === undefined ? undefined : { certFile: f.metricsTlsCert, keyFile: f.metricsTlsKey!, clientCaFile: f.metricsTlsClientCa },
    storeSizeIntervalMs: f.storeSizeInterval,
    backend: { ...store, storeTimeoutMs: f.storeTimeout, redis: { ...store.redis, durability: f.redisDurability } },
    settings: { leaseTtlMs: f.leaseTtl, maxFollowers: f.maxFollowers, followBuffer: f.followBuffer },
    shutdownGraceMs: f.shutdownGrace,
    logLevel: f.logLevel,
  };
}

/**
 * The `serve` command: runs the chosen services until SIGTERM or SIGINT, then
 * shuts down gracefully. A startup problem prints one line
 * (`mecatl-drivers: <what to do>`) and exits with status 2.
 */
export function serveCommand(): Command {
  const command = new Command("serve")
    .description("serve the mecatl.driver.v1 storage services (default: all of them on one port)")
    // A bad flag is a startup problem too: status 2, as README.md promises (commander's own is 1); --help stays 0.
    .exitOverride((err) => process.exit(err.exitCode === 0 ? 0 : 2))
    .argument("[services...]", `all, or any of: ${SERVICE_NAMES.join(", ")}`)
    .option("--listen <addr>", "gRPC listener: HOST:PORT or unix:/PATH", "127.0.0.1:50051")
    .option("--connect-listen <addr>", "also serve the Connect and gRPC-Web protocols here (HOST:PORT or unix:/PATH)")
    .option("--insecure-listen", "allow cleartext on a non-loopback address (protected networks only)", false);
  return addStoreOptions(command)
    .addOption(new Option("--lease-ttl <duration>", "lifetime of a session lease (at most 365d)").default(30_000, "30s").argParser(parseLeaseTtl))
    .option("--max-followers <n>", "most concurrent ReadAfter follow streams in this process", parsePositiveInt, 4096)
    .option("--follow-buffer <n>", "records queued for one slow follower before its stream ends with follow_lagging", parsePositiveInt, 1024)
    .option("--tls-cert <file>", "PEM certificate chain for TLS")
    .option("--tls-key <file>", "PEM private key for TLS")
    .option("--tls-client-ca <file>", "require client certificates signed by this PEM CA (mTLS)")
    .option("--auth-token-file <file>", "require 'authorization: Bearer <token>' with a token from this file (one per line, reloaded on change)")
    .option("--health-listen <addr>", "also serve grpc.health.v1 alone here, always in cleartext (HOST:PORT or unix:/PATH): for Kubernetes gRPC probes, which cannot use TLS")
    .option("--metrics-listen <addr>", "serve Prometheus metrics at http://HOST:PORT/metrics (https:// with --metrics-tls-cert)")
    .option("--metrics-tls-cert <file>", "PEM certificate chain: serve the metrics over HTTPS (may be the --tls-cert file)")
    .option("--metrics-tls-key <file>", "PEM private key for --metrics-tls-cert (may be the --tls-key file)")
    .option("--metrics-tls-client-ca <file>", "require scrapers to present a client certificate signed by this PEM CA")
    .addOption(
      new Option("--store-size-interval <duration>", "how often the store's size per kind is measured for the metrics (0: never)")
        .default(60_000, "60s")
        .argParser(parseDurationOrZero),
    )
    .addOption(
      new Option("--redis-durability <mode>", "strict: require appendonly yes + appendfsync always; relaxed: accept weaker persistence (acknowledged writes may be lost)")
        .choices(["strict", "relaxed"])
        .default("strict"),
    )
    .addOption(
      new Option("--store-timeout <duration>", "longest one store operation may take (retries included) before the call fails with UNAVAILABLE")
        .default(DEFAULT_STORE_TIMEOUT_MS, "5s")
        .argParser(parseDuration),
    )
    .addOption(new Option("--shutdown-grace <duration>", "time unary calls get to finish after SIGTERM").default(10_000, "10s").argParser(parseDuration))
    .addOption(new Option("--log-level <level>", "log level").choices(["trace", "debug", "info", "warn", "error", "fatal"]).default("info"))
    .action(async (services: string[], flags: ServeFlags) => {
      try {
        const server = await startServer(serveOptions(services, flags));
        const stop = (signal: string) => {
          server.logger.info({ signal }, "shutting down");
          void server.close().then(() => process.exit(0));
        };
        process.once("SIGTERM", () => stop("SIGTERM"));
        process.once("SIGINT", () => stop("SIGINT"));
      } catch (err) {
        if (err instanceof StartupError) {
          process.stderr.write(`mecatl-drivers: ${err.message}\n`);
          process.exit(2);
        }
        throw err;
      }
    });
}
