import * as grpc from "@grpc/grpc-js";
import { createServer as createHttpServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from "node:http";
import { createSecureServer, type Http2SecureServer, type Http2ServerRequest, type Http2ServerResponse, type ServerHttp2Stream } from "node:http2";
import { existsSync, lstatSync, unlinkSync } from "node:fs";
import { connect, type Server as NetServer } from "node:net";
import { dirname } from "node:path";
import { Health } from "../../gen/grpc/health/v1/health_pb.js";
import { openBackend, backendProblem, onBackendHealthChange, onDurabilityCheck, closeBackend, type BackendOptions, type Backend } from "../storage/backend.js";
import { StartupError } from "../storage/redis-connection.js";
import { refuseUnfinishedCopy } from "../storage/copy/unfinished-copy.js";
import { mountOnGrpc, OpenStreams, type AnyServiceImpl } from "./grpc-adapter.js";
import { DirectUnaryPath } from "./grpc-direct-unary.js";
import { AnswerStallWatch } from "./answer-stall-watch.js";
import { grpcAdmission, type AdmissionOptions } from "./admission.js";
import { joinGrpcMessagesOnArrival } from "./grpc-message-joiner.js";
import { sendFramedAnswersAsIs } from "./grpc-framed-answers.js";
import { connectHandler } from "./connect-handler.js";
import { ConnectCalls } from "./connect-calls.js";
import { shuttingDown } from "../rpc/errors.js";
import { servedOnConnect } from "./connect-answers.js";
import { InflightBudget } from "./inflight-budget.js";
import { memoryTrimmer } from "./memory-trim.js";
import { instrument } from "./instrument.js";
import { HealthState, ServingStatus, healthService, healthChangeLogger } from "./health.js";
import { Metrics } from "./metrics.js";
import { refreshStoreMetrics } from "./store-metrics.js";
import { TokenFile } from "./auth.js";
import { createLogger, routeProcessOutput, type Logger } from "./logger.js";
import { parseListenAddress, formatListenAddress, isLocalListenAddress, type ListenAddress } from "./addresses.js";
import { readTls, type TlsFiles, type TlsMaterial } from "./tls.js";
import { logPeerTlsError, notePeers, type FailedTlsSocket } from "./tls-peer.js";
import { grpcSocketServer } from "./grpc-listener.js";
import { watchConnectPeers, type ConnectKeepalive } from "./connect-keepalive.js";
import { StartGate } from "./start-gate.js";
import { tracingSettings } from "./tracing-settings.js";
import { startTracing } from "./tracing-sdk.js";
import { SERVICE_MODULES, type MountedService, type ServiceName, type ServiceSettings } from "./service-registry.js";

/** Largest message accepted or sent: 64 MiB of snapshot plus 1 MiB of headroom (wire-contract.md section 1). */
export const MAX_MESSAGE_BYTES = 64 * 1024 * 1024 + 1024 * 1024;

/** Everything `serve` needs, already parsed from flags. */
export interface ServerOptions {
  services: readonly ServiceName[];
  /** gRPC listener: `host:port` or `unix:/path`. */
  listen: string;
  /** Optional Connect + gRPC-Web listener for curl and browsers. */
  connectListen?: string;
  /** Allow cleartext on a non-loopback listener. */
  insecureListen: boolean;
  tls?: TlsFiles;
  authTokenFile?: string;
  /**
   * Listener serving only grpc.health.v1, always in cleartext (`--health-listen`):
   * for Kubernetes' gRPC probes, which cannot use TLS (issue 14).
   */
  healthListen?: string;
  /** Prometheus listener `host:port`. */
  metricsListen?: string;
  /** Serve the metrics over HTTPS with these files (`--metrics-tls-cert`, `--metrics-tls-key`, `--metrics-tls-client-ca`). */
  metricsTls?: TlsFiles;
  /** Milliseconds between two measurements of the store size for the metrics (`--store-size-interval`); 0 = never. */
  storeSizeIntervalMs?: number;
  backend: BackendOptions;
  settings: ServiceSettings;
  /** Milliseconds unary calls may take to finish after SIGTERM. */
  shutdownGraceMs: number;
  /** Connection limits of the gRPC listener (issue 9: dead peers, rebalancing); the Connect listener takes its keepalive. */
  connections: ConnectionLimits;
  /** Budget for request and answer bytes in flight, in bytes (`--max-inflight-bytes`). */
  maxInflightBytes: number;
  /** Milliseconds an admitted request message may receive no bytes before its call ends UNAVAILABLE (`--request-idle-timeout`). */
  requestIdleTimeoutMs: number;
  /** Milliseconds an answer may wait with none of its bytes taken by its client before its stream is reset (`--answer-idle-timeout`; 0: never). */
  answerIdleTimeoutMs: number;
  logLevel: string;
}

/** Keepalive and connection limits of the gRPC listener (keepalive also on the Connect listener, connect-keepalive.ts). */
export interface ConnectionLimits {
  /** Milliseconds between keepalive pings on each connection (`--keepalive-time`). */
  keepaliveTimeMs: number;
  /** Milliseconds a ping may go unanswered before the connection and its streams are closed (`--keepalive-timeout`). */
  keepaliveTimeoutMs: number;
  /** Most concurrent streams (calls) on one connection (`--max-streams-per-connection`). */
  maxStreamsPerConnection: number;
  /** When set, connections older than this many milliseconds (±10 %) are asked to reconnect (`--max-connection-age`). */
  maxConnectionAgeMs?: number;
  /** Milliseconds calls get to finish on a connection past its age before it is closed (`--max-connection-age-grace`). */
  maxConnectionAgeGraceMs: number;
}

/** The in-flight budget emptying after holding at least this many bytes triggers a memory trim (memory-trim.ts). */
const TRIM_AFTER_BYTES = 64 * 1024 * 1024;

/** How long a call waits for room in the in-flight budget before RESOURCE_EXHAUSTED, in milliseconds. */
export const INFLIGHT_WAIT_MS = 2_000;

/**
 * grpc-js server options for {@link ConnectionLimits} and the message limits.
 * Channelz is off: no channelz service is served, and its per-call
 * bookkeeping (counters, timestamps, a tracker object per call) cost about
 * 2 % of the server's CPU per unary call (issue 11).
 */
function grpcServerOptions(limits: ConnectionLimits, admission: AdmissionOptions): grpc.ServerOptions {
  return {
    "grpc.enable_channelz": 0,
    "grpc.max_receive_message_length": MAX_MESSAGE_BYTES,
    "grpc.max_send_message_length": MAX_MESSAGE_BYTES,
    "grpc.keepalive_time_ms": limits.keepaliveTimeMs,
    "grpc.keepalive_timeout_ms": limits.keepaliveTimeoutMs,
    "grpc.max_concurrent_streams": limits.maxStreamsPerConnection,
    ...(limits.maxConnectionAgeMs === undefined
      ? {}
      : { "grpc.max_connection_age_ms": limits.maxConnectionAgeMs, "grpc.max_connection_age_grace_ms": limits.maxConnectionAgeGraceMs }),
    // Plain unary calls are served by grpc-direct-unary.ts and never reach these; it applies the same admission.
    interceptors: [grpcAdmission(admission)],
  };
}

/** A running server. */
export interface RunningServer {
  /** The bound gRPC address, with the real port when 0 was asked for. */
  address: string;
  connectAddress?: string;
  healthAddress?: string;
  metricsAddress?: string;
  logger: Logger;
  /**
   * Graceful stop (docs/DESIGN.md "Transport"): health to NOT_SERVING, stop
   * accepting, end follow streams with UNAVAILABLE, let unary calls finish
   * within the grace period, then close the backend and export the spans
   * still buffered (within the grace period again).
   */
  close(): Promise<void>;
}

function checkCleartext(flag: string, addr: ListenAddress, tls: boolean, insecure: boolean): void {
  if (!tls && !insecure && !isLocalListenAddress(addr)) {
    throw new StartupError(
      `refusing cleartext ${flag} on non-loopback address ${formatListenAddress(addr)}; give --tls-cert and --tls-key, or pass --insecure-listen on a protected network`,
    );
  }
}

/**
 * Removes a unix socket file left behind by a process that is gone.
 *
 * @throws StartupError naming `flag` when the path is not a socket, or another
 *   process is listening on it.
 */
async function clearStaleSocket(addr: ListenAddress, flag: string): Promise<void> {
  if (addr.kind !== "unix" || !existsSync(addr.path)) return;
  if (!lstatSync(addr.path).isSocket()) throw new StartupError(`${flag} ${addr.path} exists and is not a socket; remove it or choose another path`);
  const alive = await new Promise<boolean>((resolve) => {
    const s = connect(addr.path);
    s.once("connect", () => (s.destroy(), resolve(true)));
    s.once("error", () => resolve(false));
  });
  if (alive) throw new StartupError(`${flag} ${addr.path}: another process is listening on this socket`);
  unlinkSync(addr.path);
}

/** What to do about a listen error on `addr`, for the startup line (`; ...`), or empty when there is nothing to add. */
function listenRemedy(err: Error & { code?: string }, addr: ListenAddress, flag: string): string {
  if (addr.kind === "unix") {
    // Linux answers EACCES, not ENOENT, for a socket path whose directory is missing.
    const dir = dirname(addr.path);
    if (!existsSync(dir)) return `; its directory ${dir} does not exist: create it, or choose another ${flag}`;
    if (err.code === "EACCES") return `; this user may not create files in ${dir}: choose a directory it can write, or another ${flag}`;
  }
  if (err.code === "EADDRINUSE") return `; another process is listening there: stop it or choose another ${flag}`;
  if (err.code === "EACCES") return `; this user may not listen there: choose a port above 1023 or another ${flag}`;
  if (err.code === "EADDRNOTAVAIL") return `; no interface of this host has that address: choose one it has (127.0.0.1, 0.0.0.0) for ${flag}`;
  return "";
}

/**
 * Starts `server` listening on `addr`, after clearing a stale unix socket file.
 *
 * @returns the bound address, with the real port when 0 was asked for.
 * @throws StartupError naming `flag` when the address cannot be listened on.
 */
async function listenOn(server: NetServer, addr: ListenAddress, flag: string): Promise<string> {
  await clearStaleSocket(addr, flag);
  await new Promise<void>((resolve, reject) => {
    server.once("error", (err) => reject(new StartupError(`cannot listen on ${flag} ${formatListenAddress(addr)}: ${err.message}${listenRemedy(err, addr, flag)}`)));
    if (addr.kind === "unix") server.listen(addr.path, () => resolve());
    else server.listen(addr.port, addr.host, () => resolve());
  });
  const bound = server.address();
  return addr.kind === "unix" ? formatListenAddress(addr) : formatListenAddress({ ...addr, port: typeof bound === "object" && bound !== null ? bound.port : addr.port });
}

/**
 * The Connect and gRPC-Web listener, bound before the services exist: its
 * requests are held by `gate` until {@link ConnectListener.serve} gives it
 * the services (and `gate` opens).
 */
interface ConnectListener {
  server: HttpServer | Http2SecureServer;
  address: string;
  /** Routes requests to `mounted` from now on. */
  serve(mounted: MountedService[]): void;
}

async function listenConnect(
  addr: ListenAddress,
  tls: TlsMaterial | undefined,
  admission: AdmissionOptions,
  keepalive: ConnectKeepalive,
  gate: StartGate,
  logger: Logger,
  calls: ConnectCalls,
  stalls: AnswerStallWatch | undefined,
): Promise<ConnectListener> {
  let handler: ((req: IncomingMessage | Http2ServerRequest, res: ServerResponse | Http2ServerResponse) => void) | undefined;
  const gated = (req: IncomingMessage | Http2ServerRequest, res: ServerResponse | Http2ServerResponse) => {
    // HTTP/2 streams are watched as they open (below); an HTTP/1.1 connection once, at its first request.
    if (!("stream" in req)) stalls?.watchSocket(req.socket);
    gate.admit(
      () => handler!(req, res),
      () => req.destroy(),
    );
  };
  const server =
    tls === undefined
      ? createHttpServer(gated)
      : createSecureServer(
          {
            allowHTTP1: true,
            cert: tls.cert,
            key: tls.key,
            ca: tls.clientCa,
            requestCert: tls.clientCa !== undefined,
            rejectUnauthorized: tls.clientCa !== undefined,
            // Node refuses new streams (ENHANCE_YOUR_CALM) on a session with more than this many MiB queued,
            // 10 by default: one large answer to a slow reader would block the session's other calls. The
            // in-flight budget bounds those bytes instead (each counted 3 times, so a third of it at most).
            maxSessionMemory: Math.max(10, Math.ceil(admission.budget.limitBytes / (1024 * 1024))),
          },
          gated,
        );
  // A request that asks "Expect: 100-continue" is admitted before it is told to send its body (admission.ts).
  server.on("checkContinue", gated);
  if (stalls !== undefined && tls !== undefined) (server as Http2SecureServer).on("stream", (stream: ServerHttp2Stream) => stalls.watchStream(stream));
  if (tls !== undefined) notePeers(server);
  watchConnectPeers(server, keepalive, logger);
  server.on("tlsClientError", (err: NodeJS.ErrnoException, socket: FailedTlsSocket) => logPeerTlsError(logger, "Connect", err, socket, server));
  const address = await listenOn(server, addr, "--connect-listen");
  return {
    server,
    address,
    serve(mounted) {
      // Answers built as wire bytes reach binary callers as such, and JSON callers decoded (connect-answers.ts).
      const served = mounted.map((m) => ({ ...m, impl: servedOnConnect(m.desc, m.impl) }));
      handler = connectHandler(served, admission, MAX_MESSAGE_BYTES, calls);
    },
  };
}

/**
 * Starts tracing when the `OTEL_*` environment asks for it (tracing-settings.ts),
 * binds every listener, then opens the backend, mounts the chosen services
 * and lets the listeners serve. Binding comes first so that a busy address
 * or socket path fails the start before the store creates anything on disk
 * (issue 14); what the listeners accept meanwhile waits (start-gate.ts).
 *
 * @throws StartupError (one line, with a remedy) for a bad or busy address,
 *   unreadable TLS or token file, cleartext on a non-loopback address, a
 *   store that cannot be opened or is not durable, or an `OTEL_*` variable
 *   this build cannot honour. Whatever was bound or opened is closed first.
 */
export async function startServer(options: ServerOptions): Promise<RunningServer> {
  const logger = createLogger(options.logLevel);
  routeProcessOutput(logger);
  const grpcAddr = parseListenAddressOrFail("--listen", options.listen);
  const connectAddr = options.connectListen === undefined ? undefined : parseListenAddressOrFail("--connect-listen", options.connectListen);
  const tls = options.tls === undefined ? undefined : readTls(options.tls);
  checkCleartext("--listen", grpcAddr, tls !== undefined, options.insecureListen);
  if (connectAddr !== undefined) checkCleartext("--connect-listen", connectAddr, tls !== undefined, options.insecureListen);
  const healthAddr = options.healthListen === undefined ? undefined : parseListenAddressOrFail("--health-listen", options.healthListen);
  const metricsAddr = options.metricsListen === undefined ? undefined : parseListenAddressOrFail("--metrics-listen", options.metricsListen);
  if (metricsAddr?.kind === "unix") throw new StartupError("--metrics-listen must be HOST:PORT");
  const metricsTls = options.metricsTls === undefined ? undefined : readTls(options.metricsTls, "--metrics-tls");
  let auth: TokenFile | undefined;
  if (options.authTokenFile !== undefined) {
    try {
      auth = new TokenFile(options.authTokenFile, logger);
    } catch (err) {
      throw new StartupError(`${(err as Error).message}; create it with one token per line`);
    }
  }

  const tracingWanted = tracingSettings(process.env);
  const tracing = tracingWanted === undefined ? undefined : await startTracing(tracingWanted, logger);
  const metrics = new Metrics();
  const budget = new InflightBudget(options.maxInflightBytes, INFLIGHT_WAIT_MS, metrics.inflightBytes, { afterBytes: TRIM_AFTER_BYTES, trimmer: memoryTrimmer() });
  const admission: AdmissionOptions = { auth, budget, maxMessageBytes: MAX_MESSAGE_BYTES, requestIdleMs: options.requestIdleTimeoutMs };
  const openStreams = new OpenStreams();
  const connectCalls = new ConnectCalls();
  joinGrpcMessagesOnArrival();
  sendFramedAnswersAsIs();
  const grpcServer = new grpc.Server(grpcServerOptions(options.connections, admission));
  // Plain unary calls bypass grpc-js's interceptors (grpc-direct-unary.ts): a rule added as an interceptor must be added there too.
  // Answers whose client stopped taking their bytes are ended, on both listeners (answer-stall-watch.ts).
  const stalls =
    options.answerIdleTimeoutMs > 0
      ? new AnswerStallWatch(options.answerIdleTimeoutMs, (pendingBytes, http) =>
          logger.warn({ pendingBytes, http, answerIdleMs: options.answerIdleTimeoutMs }, "an answer's client took none of it for --answer-idle-timeout; its call was ended"),
        )
      : undefined;
  const directUnary = new DirectUnaryPath(admission, logger, stalls);
  directUnary.install(grpcServer);
  // Health requests are limited there as on the main listener (admission.ts HEALTH_REQUEST_BYTES).
  const probes = healthAddr === undefined ? undefined : new grpc.Server({ interceptors: [grpcAdmission(admission)] });
  // No route on it: every stream goes to grpc-js, with a deadline beyond a timer's reach left to the client (long-deadlines.ts).
  if (probes !== undefined) new DirectUnaryPath(admission, logger).install(probes);
  const gate = new StartGate();

  const cleanup: Array<() => unknown> = [];
  if (stalls !== undefined) cleanup.push(() => stalls.close());
  const moduleCleanup: Array<() => void | Promise<void>> = [];
  let backend: Backend | undefined;
  try {
    let grpcListener: NetServer;
    try {
      grpcListener = grpcSocketServer(grpcServer, tls, logger, gate);
    } catch (err) {
      throw new StartupError(`invalid --tls-cert/--tls-key: ${(err as Error).message}`);
    }
    const stopAccepting = () => grpcListener.listening && grpcListener.close();
    cleanup.push(stopAccepting);
    const address = await listenOn(grpcListener, grpcAddr, "--listen");
    let connect: ConnectListener | undefined;
    if (connectAddr !== undefined) {
      const listening = listenConnect(connectAddr, tls, admission, options.connections, gate, logger, connectCalls, stalls);
      cleanup.push(() => void listening.then((c) => c.server.close(), () => undefined));
      connect = await listening;
    }
    let healthAddress: string | undefined;
    if (healthAddr !== undefined) {
      // Always cleartext: Kubernetes' native gRPC probes cannot speak TLS.
      const probeListener = grpcSocketServer(probes!, undefined, logger, gate);
      cleanup.push(() => {
        if (probeListener.listening) probeListener.close();
        probes!.forceShutdown();
      });
      healthAddress = await listenOn(probeListener, healthAddr, "--health-listen");
    }
    let metricsAddress: string | undefined;
    if (metricsAddr?.kind === "tcp") {
      const m = await metrics.listen(metricsAddr.host, metricsAddr.port, metricsTls).catch((err: Error) => {
        throw new StartupError(`cannot listen on --metrics-listen ${formatListenAddress(metricsAddr)}: ${err.message}${listenRemedy(err, metricsAddr, "--metrics-listen")}`);
      });
      metricsAddress = formatListenAddress({ ...metricsAddr, port: m.port });
      cleanup.push(() => m.server.close());
    }

    // Every listener is bound: only now may the store create its files.
    const store: Backend = (backend = await openBackend({ ...options.backend, log: (msg, fields) => logger.info(fields, msg) }));
    // A half-written copy target serves part of its source as if it were all of it (issue 14).
    await refuseUnfinishedCopy(store);
    const durabilityMode = !store.durable ? (store.kind === "sqlite" ? "none" : "relaxed") : "full";
    metrics.durability.set({ mode: durabilityMode }, 1);
    if (store.kind === "sqlite") store.db.on("commit", (writes: number) => metrics.groupCommitWrites.observe(writes));
    if (durabilityMode !== "full") logger.warn({ store: store.description, durability: durabilityMode }, "writes are NOT durable: an acknowledged write can be lost");

    const ctx = { backend: store, settings: options.settings, logger, metrics, onClose: (fn: () => void | Promise<void>) => void moduleCleanup.push(fn) };
    const mounted = (await Promise.all(SERVICE_MODULES.filter((m) => options.services.includes(m.name)).map((m) => m.mount(ctx)))).flat();
    const health = new HealthState(mounted.map((m) => m.desc.typeName));
    const instrumented = mounted.map((m) => ({ desc: m.desc, impl: instrument(m.desc, m.impl, { metrics, logger, trace: tracing === undefined ? undefined : { backend: store.kind } }) }));
    const healthImpl = healthService(health) as unknown as AnyServiceImpl;
    // Health stays on grpc-js: it is open without a token and takes nothing from the budget (admission.ts).
    for (const m of instrumented) mountOnGrpc(grpcServer, m.desc, m.impl, openStreams, admission.budget, directUnary);
    // Health answers are not charged to the budget, and its requests are limited instead (admission.ts): a probe is answered when the budget is full.
    mountOnGrpc(grpcServer, Health, healthImpl, openStreams, undefined);
    connect?.serve([...instrumented, { desc: Health, impl: healthImpl }]);
    if (probes !== undefined) mountOnGrpc(probes, Health, healthImpl, openStreams, undefined);
    if (metricsAddress !== undefined && (options.storeSizeIntervalMs ?? 0) > 0) {
      const stop = await refreshStoreMetrics(store, metrics, options.storeSizeIntervalMs!, logger).catch((err: Error) => {
        throw new StartupError(`cannot measure the store for the metrics (${err.message}); pass --store-size-interval 0 to turn the measurement off`);
      });
      moduleCleanup.push(stop);
    }

    const updateHealth = () => {
      const problem = backendProblem(store);
      metrics.backendUp.set({ backend: store.kind }, problem === undefined ? 1 : 0);
      if (closing) return;
      health.setAll(problem === undefined ? ServingStatus.SERVING : ServingStatus.NOT_SERVING);
      logHealthChange(problem);
    };
    let closing = false;
    const logHealthChange = healthChangeLogger(logger, store.description);
    const stopWatching = onBackendHealthChange(store, updateHealth);
    const stopCounting = onDurabilityCheck(store, (outcome) => metrics.durabilityChecks.inc({ outcome }));
    updateHealth();
    gate.open();
    // Always logged, whatever --log-level says: supervisors and tests read the
    // bound address (the real port when :0 was asked for) from this line.
    logger
      .child({}, { level: "info" })
      .info({ address, connectAddress: connect?.address, healthAddress, metricsAddress, services: options.services, store: store.description, ...sqliteSettings(store) }, "listening");

    let closed: Promise<void> | undefined;
    const close = () => {
      closed ??= (async () => {
        closing = true;
        health.setAll(ServingStatus.NOT_SERVING);
        stopAccepting();
        // One turn of the event loop first, so that every health Watch sends its NOT_SERVING before its stream ends.
        await new Promise((resolve) => setImmediate(resolve));
        openStreams.shutdown();
        connectCalls.shutdown(shuttingDown());
        await new Promise<void>((resolve) => {
          const timer = setTimeout(() => {
            logger.warn({ graceMs: options.shutdownGraceMs }, "shutdown grace elapsed; cancelling calls still running");
            grpcServer.forceShutdown();
            resolve();
          }, options.shutdownGraceMs);
          // The Connect listener's calls get the same grace (connect-calls.ts).
          const grpcDrained = new Promise<void>((done) => grpcServer.tryShutdown(() => done()));
          void Promise.all([grpcDrained, connectCalls.drained()]).then(() => {
            clearTimeout(timer);
            resolve();
          });
        });
        for (const c of cleanup) c();
        for (const c of moduleCleanup) await c();
        stopWatching();
        stopCounting();
        auth?.close();
        await closeBackend(store);
        await tracing?.shutdown(options.shutdownGraceMs);
        logger.info("stopped");
      })();
      return closed;
    };
    return { address, connectAddress: connect?.address, healthAddress, metricsAddress, logger, close };
  } catch (err) {
    gate.fail();
    grpcServer.forceShutdown();
    for (const c of cleanup) c();
    for (const c of moduleCleanup) await c();
    auth?.close();
    if (backend !== undefined) await closeBackend(backend);
    await tracing?.shutdown(options.shutdownGraceMs);
    throw err;
  }
}

/** For SQLite, the journal mode and synchronous setting its live connection reports (issue 15), logged with `listening`. */
function sqliteSettings(backend: Backend): { journalMode?: string; synchronous?: string } {
  return backend.kind === "sqlite" ? backend.db.settings : {};
}

function parseListenAddressOrFail(flag: string, value: string): ListenAddress {
  try {
    return parseListenAddress(flag, value);
  } catch (err) {
    throw new StartupError((err as Error).message);
  }
}
