import * as grpc from "@grpc/grpc-js";
import { createServer as createHttpServer, type Server as HttpServer } from "node:http";
import { createSecureServer, type Http2SecureServer } from "node:http2";
import { existsSync, lstatSync, unlinkSync } from "node:fs";
import { connect } from "node:net";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { Health } from "../../gen/grpc/health/v1/health_pb.js";
import { openBackend, backendHealthy, onBackendHealthChange, closeBackend, type BackendOptions, type Backend } from "../storage/backend.js";
import { durabilityWatch, StartupError } from "../storage/redis-connection.js";
import { mountOnGrpc, type AnyServiceImpl } from "./grpc-adapter.js";
import { instrument } from "./instrument.js";
import { HealthState, ServingStatus, healthService } from "./health.js";
import { Metrics } from "./metrics.js";
import { refreshStoreMetrics } from "./store-metrics.js";
import { TokenFile } from "./auth.js";
import { createLogger, type Logger } from "./logger.js";
import { parseListenAddress, formatListenAddress, isLocalListenAddress, type ListenAddress } from "./addresses.js";
import { grpcCredentials, readTls, type TlsFiles, type TlsMaterial } from "./tls.js";
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
  logLevel: string;
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
   * Graceful stop (DESIGN.md "Transport"): health to NOT_SERVING, stop
   * accepting, end follow streams with UNAVAILABLE, let unary calls finish
   * within the grace period, then close the backend.
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

/** Removes a unix socket file left behind by a process that is gone. */
async function clearStaleSocket(addr: ListenAddress): Promise<void> {
  if (addr.kind !== "unix" || !existsSync(addr.path)) return;
  if (!lstatSync(addr.path).isSocket()) throw new StartupError(`--listen ${addr.path} exists and is not a socket; remove it or choose another path`);
  const alive = await new Promise<boolean>((resolve) => {
    const s = connect(addr.path);
    s.once("connect", () => (s.destroy(), resolve(true)));
    s.once("error", () => resolve(false));
  });
  if (alive) throw new StartupError(`--listen ${addr.path}: another process is listening on this socket`);
  unlinkSync(addr.path);
}

function bindGrpc(server: grpc.Server, addr: ListenAddress, creds: grpc.ServerCredentials): Promise<string> {
  return new Promise((resolve, reject) => {
    server.bindAsync(formatListenAddress(addr), creds, (err, port) => {
      if (err !== null) reject(new StartupError(`cannot listen on ${formatListenAddress(addr)}: ${err.message}`));
      else resolve(addr.kind === "unix" ? formatListenAddress(addr) : formatListenAddress({ ...addr, port }));
    });
  });
}

async function listenConnect(mounted: MountedService[], addr: ListenAddress, tls: TlsMaterial | undefined): Promise<{ server: HttpServer | Http2SecureServer; address: string }> {
  const handler = connectNodeAdapter({
    readMaxBytes: MAX_MESSAGE_BYTES,
    writeMaxBytes: MAX_MESSAGE_BYTES,
    routes: (router) => {
      for (const m of mounted) router.service(m.desc, m.impl as never);
    },
  });
  const server =
    tls === undefined
      ? createHttpServer(handler)
      : createSecureServer({ allowHTTP1: true, cert: tls.cert, key: tls.key, ca: tls.clientCa, requestCert: tls.clientCa !== undefined, rejectUnauthorized: tls.clientCa !== undefined }, handler);
  await new Promise<void>((resolve, reject) => {
    server.once("error", (err) => reject(new StartupError(`cannot listen on --connect-listen ${formatListenAddress(addr)}: ${err.message}`)));
    if (addr.kind === "unix") server.listen(addr.path, () => resolve());
    else server.listen(addr.port, addr.host, () => resolve());
  });
  const bound = server.address();
  const address = addr.kind === "unix" ? formatListenAddress(addr) : formatListenAddress({ ...addr, port: typeof bound === "object" && bound !== null ? bound.port : addr.port });
  return { server, address };
}

/**
 * Opens the backend, mounts the chosen services and starts the listeners.
 *
 * @throws StartupError (one line, with a remedy) for a bad address, unreadable
 *   TLS or token file, cleartext on a non-loopback address, or a store that
 *   cannot be opened or is not durable.
 */
export async function startServer(options: ServerOptions): Promise<RunningServer> {
  const logger = createLogger(options.logLevel);
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

  const metrics = new Metrics();
  const backend: Backend = await openBackend(options.backend);
  const durabilityMode = !backend.durable ? (backend.kind === "sqlite" ? "none" : "relaxed") : "full";
  metrics.durability.set({ mode: durabilityMode }, 1);
  if (backend.kind === "sqlite") backend.db.on("commit", (writes: number) => metrics.groupCommitWrites.observe(writes));
  if (durabilityMode !== "full") logger.warn({ store: backend.description, durability: durabilityMode }, "writes are NOT durable: an acknowledged write can be lost");
  const watch = backend.kind === "redis" ? durabilityWatch(backend.redis) : undefined;
  watch?.on("change", () => {
    if (watch.problem !== undefined) logger.error({ store: backend.description, problem: watch.problem }, "Redis is no longer durable: refusing writes until it is");
    else logger.info({ store: backend.description }, "Redis is durable again: accepting writes");
  });

  const moduleCleanup: Array<() => void | Promise<void>> = [];
  const ctx = { backend, settings: options.settings, logger, metrics, onClose: (fn: () => void | Promise<void>) => void moduleCleanup.push(fn) };
  const mounted = SERVICE_MODULES.filter((m) => options.services.includes(m.name)).flatMap((m) => m.mount(ctx));
  const health = new HealthState(mounted.map((m) => m.desc.typeName));
  const instrumented = mounted.map((m) => ({ desc: m.desc, impl: instrument(m.desc, m.impl, { auth, metrics, logger }) }));
  const withHealth: MountedService[] = [...instrumented, { desc: Health, impl: healthService(health) as unknown as AnyServiceImpl }];

  const streamShutdown = new AbortController();
  const grpcServer = new grpc.Server({
    "grpc.max_receive_message_length": MAX_MESSAGE_BYTES,
    "grpc.max_send_message_length": MAX_MESSAGE_BYTES,
  });
  for (const m of withHealth) mountOnGrpc(grpcServer, m.desc, m.impl, streamShutdown.signal);

  const cleanup: Array<() => unknown> = [];
  try {
    await clearStaleSocket(grpcAddr);
    const address = await bindGrpc(grpcServer, grpcAddr, grpcCredentials(tls));
    let connect: { server: HttpServer | Http2SecureServer; address: string } | undefined;
    if (connectAddr !== undefined) {
      await clearStaleSocket(connectAddr);
      connect = await listenConnect(withHealth, connectAddr, tls);
      cleanup.push(() => connect!.server.close());
    }
    let healthAddress: string | undefined;
    if (healthAddr !== undefined) {
      const probes = new grpc.Server();
      mountOnGrpc(probes, Health, healthService(health) as unknown as AnyServiceImpl, streamShutdown.signal);
      await clearStaleSocket(healthAddr);
      healthAddress = await bindGrpc(probes, healthAddr, grpc.ServerCredentials.createInsecure());
      cleanup.push(() => probes.forceShutdown());
    }
    let metricsAddress: string | undefined;
    if (metricsAddr?.kind === "tcp") {
      const m = await metrics.listen(metricsAddr.host, metricsAddr.port, metricsTls).catch((err: Error) => {
        throw new StartupError(`cannot listen on --metrics-listen ${formatListenAddress(metricsAddr)}: ${err.message}`);
      });
      metricsAddress = formatListenAddress({ ...metricsAddr, port: m.port });
      cleanup.push(() => m.server.close());
      if ((options.storeSizeIntervalMs ?? 0) > 0) {
        const stop = await refreshStoreMetrics(backend, metrics, options.storeSizeIntervalMs!, logger).catch((err: Error) => {
          throw new StartupError(`cannot measure the store for the metrics (${err.message}); pass --store-size-interval 0 to turn the measurement off`);
        });
        moduleCleanup.push(stop);
      }
    }

    const updateHealth = () => {
      const up = backendHealthy(backend);
      metrics.backendUp.set({ backend: backend.kind }, up ? 1 : 0);
      if (!closing) health.setAll(up ? ServingStatus.SERVING : ServingStatus.NOT_SERVING);
    };
    let closing = false;
    const stopWatching = onBackendHealthChange(backend, updateHealth);
    updateHealth();
    // Always logged, whatever --log-level says: supervisors and tests read the
    // bound address (the real port when :0 was asked for) from this line.
    logger
      .child({}, { level: "info" })
      .info({ address, connectAddress: connect?.address, healthAddress, metricsAddress, services: options.services, store: backend.description }, "listening");

    let closed: Promise<void> | undefined;
    const close = () => {
      closed ??= (async () => {
        closing = true;
        health.setAll(ServingStatus.NOT_SERVING);
        streamShutdown.abort();
        await new Promise<void>((resolve) => {
          const timer = setTimeout(() => {
            logger.warn({ graceMs: options.shutdownGraceMs }, "shutdown grace elapsed; cancelling calls still running");
            grpcServer.forceShutdown();
            resolve();
          }, options.shutdownGraceMs);
          grpcServer.tryShutdown(() => {
            clearTimeout(timer);
            resolve();
          });
        });
        for (const c of cleanup) c();
        for (const c of moduleCleanup) await c();
        stopWatching();
        auth?.close();
        await closeBackend(backend);
        logger.info("stopped");
      })();
      return closed;
    };
    return { address, connectAddress: connect?.address, healthAddress, metricsAddress, logger, close };
  } catch (err) {
    grpcServer.forceShutdown();
    for (const c of cleanup) c();
    for (const c of moduleCleanup) await c();
    auth?.close();
    await closeBackend(backend);
    throw err;
  }
}

function parseListenAddressOrFail(flag: string, value: string): ListenAddress {
  try {
    return parseListenAddress(flag, value);
  } catch (err) {
    throw new StartupError((err as Error).message);
  }
}
