import { HELD_COPIES } from "./inflight-budget.js";
import { Command, Option, InvalidArgumentError } from "commander";
import { parseBytes, parseDuration, parseDurationAtLeast, parseDurationOrZero, parsePositiveInt } from "../../common/flag-parsers.js";
import type { ServerOptions } from "./server.js";
import { defaultMaxInflightBytes, MIN_DEFAULT_INFLIGHT_BYTES } from "./inflight-default.js";
import { SERVICE_NAMES, type ServiceName } from "./service-registry.js";
import { StartupError } from "../storage/redis-connection.js";
import { StoreFailure } from "../storage/store-failure.js";
import { writeStartupRefusal } from "./startup-refusal.js";
import { DEFAULT_STORE_TIMEOUT_MS } from "../storage/backend.js";
import { MAX_LEASE_TTL_MS } from "../session-lease/rules.js";
import { DEFAULT_FOLLOW_STALL_MS } from "../event-log/follow-hub.js";
import { DEFAULT_FOLLOW_POLL_MS } from "../event-log/sqlite-feed.js";
import { addStoreOptions, redisFlagsGiven, storeBackendOptions, type StoreFlags } from "./store-options.js";

/** Shortest `--lease-ttl`, in milliseconds: a holder must be able to renew before its lease expires. */
export const MIN_LEASE_TTL_MS = 100;

/** Shortest `--store-timeout`, in milliseconds: the server's own store operations at start need more than that. */
export const MIN_STORE_TIMEOUT_MS = 100;

/** Least `--keepalive-time` and `--max-connection-age`, in milliseconds: below it a connection does little but ping or close. */
const MIN_CONNECTION_TIMER_MS = 100;

/** `--lease-ttl`'s lower bound, checked once per parse by one parser made here (no timer waits on a TTL: its upper bound is {@link parseLeaseTtl}'s). */
const parseLeaseDuration = parseDurationAtLeast(MIN_LEASE_TTL_MS, "a holder renews its lease before it expires, which takes a round trip", Infinity);

/**
 * Parses `--lease-ttl`: a duration (see {@link parseDuration}) of at least
 * {@link MIN_LEASE_TTL_MS} and at most 365 days, so that expiry arithmetic
 * stays exact (session-lease/rules.ts).
 *
 * @throws InvalidArgumentError when the text is not a duration in that range.
 */
export function parseLeaseTtl(text: string): number {
  const value = parseLeaseDuration(text);
  if (value > MAX_LEASE_TTL_MS) throw new InvalidArgumentError(`a lease TTL of at most 365d is supported, got ${JSON.stringify(text)}`);
  return value;
}

/** Most replicas `--redis-wait-replicas` may ask for. */
export const MAX_WAIT_REPLICAS = 16;

/**
 * Parses `--redis-wait-replicas`: 0 (no WAIT) to {@link MAX_WAIT_REPLICAS}.
 *
 * @throws InvalidArgumentError for anything else.
 */
export function parseWaitReplicas(text: string): number {
  const n = Number(text);
  if (text.trim() === "" || !Number.isInteger(n) || n < 0 || n > MAX_WAIT_REPLICAS) {
    throw new InvalidArgumentError(`expected a whole number of replicas from 0 to ${MAX_WAIT_REPLICAS}, got ${JSON.stringify(text)}`);
  }
  return n;
}

/** The smallest `--max-inflight-bytes` accepted, in bytes (1 MiB): below it, ordinary calls would be refused for want of room. */
export const MIN_INFLIGHT_BYTES = 1024 * 1024;

/**
 * Parses `--max-inflight-bytes` (issue 10: every setting validated): a size
 * as {@link parseBytes} reads it, at least {@link MIN_INFLIGHT_BYTES}. Each
 * message is charged {@link HELD_COPIES} times, so a budget below
 * {@link MIN_DEFAULT_INFLIGHT_BYTES} (three largest messages) refuses the
 * largest calls the contract allows; that is a choice an operator may make (a
 * small container), and `serve --help` says so.
 *
 * @throws InvalidArgumentError when the text is not a size, or is below 1 MiB.
 */
export function parseInflightBudget(text: string): number {
  const value = parseBytes(text);
  if (value < MIN_INFLIGHT_BYTES) throw new InvalidArgumentError(`at least 1MB is needed (each call's bytes are held ${HELD_COPIES} times), got ${JSON.stringify(text)}`);
  return value;
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

/**
 * Refuses Redis flags given with an SQLite store: they would be accepted and
 * ignored (issue 10, deliverable 4).
 *
 * @throws StartupError naming the first such flag.
 */
function refuseRedisFlagsForSqlite(f: ServeFlags): void {
  if (!f.store.startsWith("sqlite:")) return;
  const given = [...redisFlagsGiven(f), ...(f.redisDurability !== "strict" ? ["--redis-durability"] : []), ...(f.redisWaitReplicas !== 0 ? ["--redis-wait-replicas"] : [])];
  const flag = given[0];
  if (flag !== undefined) throw new StartupError(`${flag} applies to Redis stores only, and --store is ${JSON.stringify(f.store)}; drop the flag or use a Redis --store (redis://, rediss://, redis+cluster:// or rediss+cluster://)`);
}

/**
 * Refuses SQLite flags given with a Redis store (Redis followers wake on
 * Pub/Sub and never poll).
 *
 * @throws StartupError naming the flag.
 */
function refuseSqliteFlagsForRedis(f: ServeFlags): void {
  if (f.store.startsWith("sqlite:") || f.followPollInterval === DEFAULT_FOLLOW_POLL_MS) return;
  throw new StartupError(`--follow-poll-interval applies to SQLite stores only, and --store is ${JSON.stringify(f.store)}; drop the flag (Redis followers wake on Pub/Sub)`);
}

/** Flag values of `serve` as commander hands them over. */
interface ServeFlags extends StoreFlags {
  listen: string;
  connectListen?: string;
  insecureListen: boolean;
  leaseTtl: number;
  maxFollowers: number;
  followBuffer: number;
  followStall: number;
  followPollInterval: number;
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
  redisWaitReplicas: number;
  shutdownGrace: number;
  requestIdleTimeout: number;
  answerIdleTimeout: number;
  storeTimeout: number;
  keepaliveTime: number;
  keepaliveTimeout: number;
  maxStreamsPerConnection: number;
  maxConnectionAge?: number;
  maxConnectionAgeGrace: number;
  maxInflightBytes: number;
  logLevel: string;
}

/**
 * Turns `serve` flags into {@link ServerOptions}.
 *
 * @throws StartupError for combinations no single flag parser can catch (a
 *   key without a certificate, an unknown service name, a Redis flag with an
 *   SQLite store).
 */
export function serveOptions(serviceArgs: string[], f: ServeFlags): ServerOptions {
  if ((f.tlsCert === undefined) !== (f.tlsKey === undefined)) throw new StartupError("--tls-cert and --tls-key go together; give both or neither");
  if (f.tlsClientCa !== undefined && f.tlsCert === undefined) throw new StartupError("--tls-client-ca needs --tls-cert and --tls-key");
  refuseRedisFlagsForSqlite(f);
  const services = resolveServices(serviceArgs);
  refuseSqliteFlagsForRedis(f);
  if ((f.metricsTlsCert === undefined) !== (f.metricsTlsKey === undefined)) throw new StartupError("--metrics-tls-cert and --metrics-tls-key go together; give both or neither");
  if (f.metricsTlsClientCa !== undefined && f.metricsTlsCert === undefined) throw new StartupError("--metrics-tls-client-ca needs --metrics-tls-cert and --metrics-tls-key");
  if (f.metricsTlsCert !== undefined && f.metricsListen === undefined) throw new StartupError("--metrics-tls-cert needs --metrics-listen");
  const store = storeBackendOptions(f);
  return {
    services,
    listen: f.listen,
    connectListen: f.connectListen,
    insecureListen: f.insecureListen,
    tls: f.tlsCert === undefined ? undefined : { certFile: f.tlsCert, keyFile: f.tlsKey!, clientCaFile: f.tlsClientCa },
    authTokenFile: f.authTokenFile,
    healthListen: f.healthListen,
    metricsListen: f.metricsListen,
    metricsTls: f.metricsTlsCert === undefined ? undefined : { certFile: f.metricsTlsCert, keyFile: f.metricsTlsKey!, clientCaFile: f.metricsTlsClientCa },
    storeSizeIntervalMs: f.storeSizeInterval,
    backend: { ...store, storeTimeoutMs: f.storeTimeout, redis: { ...store.redis, durability: f.redisDurability, waitReplicas: f.redisWaitReplicas } },
    settings: { leaseTtlMs: f.leaseTtl, maxFollowers: f.maxFollowers, followBuffer: f.followBuffer, followStallMs: f.followStall, followPollIntervalMs: f.followPollInterval },
    shutdownGraceMs: f.shutdownGrace,
    requestIdleTimeoutMs: f.requestIdleTimeout,
    answerIdleTimeoutMs: f.answerIdleTimeout,
    connections: {
      keepaliveTimeMs: f.keepaliveTime,
      keepaliveTimeoutMs: f.keepaliveTimeout,
      maxStreamsPerConnection: f.maxStreamsPerConnection,
      maxConnectionAgeMs: f.maxConnectionAge,
      maxConnectionAgeGraceMs: f.maxConnectionAgeGrace,
    },
    maxInflightBytes: f.maxInflightBytes,
    logLevel: f.logLevel,
  };
}

/** The epilogue of `serve --help`: tracing has no flags, only the standard environment variables (README.md "Tracing"). */
const TRACING_HELP = `
Tracing (OpenTelemetry) is off by default and set only by the standard environment variables:
  OTEL_TRACES_EXPORTER         otlp, console or none (unset: off, unless an OTLP endpoint is set)
  OTEL_EXPORTER_OTLP_ENDPOINT  collector URL, e.g. http://otel-collector:4318
  OTEL_EXPORTER_OTLP_PROTOCOL  http/protobuf (default), http/json or grpc
  OTEL_SERVICE_NAME            service.name (default mecatl-drivers)
  OTEL_TRACES_SAMPLER[_ARG]    default parentbased_always_on
One span per RPC, with children per store operation and SQLite group commit; the parent is
the caller's traceparent. Session ids and schedule names are exported only as the first 16
hex characters of their SHA-256. See README.md, "Tracing".`;

/**
 * The `serve` command: runs the chosen services until SIGTERM or SIGINT, then
 * shuts down gracefully. A startup problem prints one line
 * (`mecatl-drivers: <what to do>` on a terminal, a JSON log line otherwise:
 * {@link writeStartupRefusal}) and exits with status 2.
 */
export function serveCommand(): Command {
  const command = new Command("serve")
    .description("serve the mecatl.driver.v1 storage services (default: all of them on one port)")
    // A bad flag is a startup problem too: status 2, as README.md promises (commander's own is 1); --help stays 0.
    .exitOverride((err) => process.exit(err.exitCode === 0 ? 0 : 2))
    // A flag commander itself refuses is reported like every other startup problem.
    .configureOutput({ outputError: (text) => writeStartupRefusal(`${text.trim().replace(/^error: /, "")}; see mecatl-drivers serve --help`) })
    .argument("[services...]", `all, or any of: ${SERVICE_NAMES.join(", ")}`)
    .option("--listen <addr>", "gRPC listener: HOST:PORT or unix:/PATH", "127.0.0.1:50051")
    .option("--connect-listen <addr>", "also serve the Connect and gRPC-Web protocols here (HOST:PORT or unix:/PATH)")
    .option("--insecure-listen", "allow cleartext on a non-loopback address (protected networks only)", false);
  return addStoreOptions(command)
    .addOption(new Option("--lease-ttl <duration>", "lifetime of a session lease (at least 100ms, at most 365d)").default(30_000, "30s").argParser(parseLeaseTtl))
    .option("--max-followers <n>", "most concurrent ReadAfter follow streams in this process", parsePositiveInt, 4096)
    .option("--follow-buffer <n>", "records a live follower may fall behind the log; past it, a follower that reads nothing for --follow-stall ends with follow_lagging", parsePositiveInt, 1024)
    .addOption(
      new Option("--follow-stall <duration>", "how long a follower more than --follow-buffer records behind may read nothing before its stream ends with follow_lagging (resumable)")
        .default(DEFAULT_FOLLOW_STALL_MS, "2s")
        .argParser(parseDuration),
    )
    .addOption(
      new Option(
        "--follow-poll-interval <duration>",
        "SQLite: how often followers check for appends by other server processes on the same file besides waking on each change of its WAL (a safety net)",
      )
        .default(DEFAULT_FOLLOW_POLL_MS, "1s")
        .argParser(parseDuration),
    )
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
      new Option(
        "--redis-wait-replicas <n>",
        "answer a write OK only once this many replicas hold it (WAIT n after each write, on its primary); if they do not in time, the call fails UNAVAILABLE with the outcome unknown",
      )
        .default(0)
        .argParser(parseWaitReplicas),
    )
    .addOption(
      new Option("--store-timeout <duration>", "longest one store operation may take (retries included) before the call fails with UNAVAILABLE (at least 100ms)")
        .default(DEFAULT_STORE_TIMEOUT_MS, "5s")
        .argParser(parseDurationAtLeast(MIN_STORE_TIMEOUT_MS, "the server's own store operations at start (opening, checks) take longer")),
    )
    .addOption(
      new Option("--keepalive-time <duration>", "ping each gRPC connection (and HTTP/2 Connect connection) this often (at least 100ms); a peer that does not answer is dropped and its streams end; HTTP/1.1 connections get TCP keepalive")
        .default(30_000, "30s")
        .argParser(parseDurationAtLeast(MIN_CONNECTION_TIMER_MS, "a ping must have time to be answered before the next")),
    )
    .addOption(
      new Option("--keepalive-timeout <duration>", "how long a keepalive ping may go unanswered before the connection is closed")
        .default(10_000, "10s")
        .argParser(parseDuration),
    )
    .option("--max-streams-per-connection <n>", "most concurrent calls (streams included) on one gRPC connection; clients queue further calls", parsePositiveInt, 2048)
    .addOption(
      new Option("--max-connection-age <duration>", "ask clients to reconnect after this long (±10%, at least 100ms), so long-lived connections rebalance across replicas (default: never)").argParser(
        parseDurationAtLeast(MIN_CONNECTION_TIMER_MS, "a younger connection could not carry a call before it is closed"),
      ),
    )
    .addOption(
      new Option("--max-connection-age-grace <duration>", "time calls get to finish on a connection past --max-connection-age before it is closed (follow streams then resume elsewhere)")
        .default(30_000, "30s")
        .argParser(parseDuration),
    )
    .addOption(
      new Option(
        "--max-inflight-bytes <size>",
        "memory budget for request and answer bytes in flight (e.g. 512MB, 2GB; at least 1MB); each call's bytes count 3 times, so a call larger than a third of it is refused; calls beyond it wait up to 2s, then RESOURCE_EXHAUSTED",
      )
        .default(defaultMaxInflightBytes(), `a quarter of the memory available (cgroup limit or RAM), and at least ${MIN_DEFAULT_INFLIGHT_BYTES} bytes, one maximum-size call counted 3 times`)
        .argParser(parseInflightBudget),
    )
    .addOption(
      new Option(
        "--request-idle-timeout <duration>",
        "how long a request that has begun to arrive, holding its share of --max-inflight-bytes, may receive no bytes before its call ends UNAVAILABLE (nothing stored; gRPC and Connect listeners)",
      )
        .default(30_000, "30s")
        .argParser(parseDuration),
    )
    .addOption(
      new Option(
        "--answer-idle-timeout <duration>",
        "how long an answer may wait with none of its bytes taken by its client before its call is ended (its stream reset, or its HTTP/1.1 connection closed) and its share of --max-inflight-bytes given back; a slow reader is never cut off (0: never; gRPC and Connect listeners)",
      )
        .default(30_000, "30s")
        .argParser(parseDurationOrZero),
    )
    .addOption(new Option("--shutdown-grace <duration>", "time unary calls get to finish after SIGTERM").default(10_000, "10s").argParser(parseDuration))
    .addOption(new Option("--log-level <level>", "log level").choices(["trace", "debug", "info", "warn", "error", "fatal"]).default("info"))
    .addHelpText("after", TRACING_HELP)
    .action(async (services: string[], flags: ServeFlags) => {
      try {
        const options = serveOptions(services, flags);
        // Loaded here, not at the top: the operator commands share this executable and need none of it.
        const { startServer } = await import("./server.js");
        const server = await startServer(options);
        const stop = (signal: string) => {
          server.logger.info({ signal }, "shutting down");
          void server.close().then(() => process.exit(0));
        };
        process.once("SIGTERM", () => stop("SIGTERM"));
        process.once("SIGINT", () => stop("SIGINT"));
      } catch (err) {
        if (err instanceof StartupError) {
          writeStartupRefusal(err.message);
          process.exit(2);
        }
        if (err instanceof StoreFailure) {
          // The store answered one of the server's own operations at start with a failure (too short a --store-timeout for a slow disk, a lock held elsewhere): a startup problem, not a crash.
          writeStartupRefusal(`the store failed while the server was starting: ${err.message}; check --store and --store-timeout`);
          process.exit(2);
        }
        throw err;
      }
    });
}
