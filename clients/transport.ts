import { connect as netConnect, isIP } from "node:net";
import { connect as tlsConnect } from "node:tls";
import type { SecureClientSessionOptions, ClientSessionOptions, Http2Session, ClientHttp2Stream, ClientSessionRequestOptions, OutgoingHttpHeaders } from "node:http2";
import { Code, ConnectError, type Interceptor, type Transport } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { DriverConfigError, parseTarget, type DriverTarget } from "./targets.js";
import { decodeStringsVerbatim } from "../common/verbatim-utf8.js";
import { errorChain } from "./error-chain.js";

// Answers keep their strings as the server sent them, a leading U+FEFF included.
decodeStringsVerbatim();

/**
 * Largest message sent or accepted: the harness's 64 MiB snapshot limit
 * (wire-contract.md section 1) plus 1 MiB for the envelope around the payload,
 * the same figure the server uses.
 */
export const MAX_MESSAGE_BYTES = 64 * 1024 * 1024 + 1024 * 1024;

/** PEM material for `--driver-tls` (section 6). Absent fields fall back to the system roots / no client certificate. */
export interface DriverTls {
  /** CA bundle that signs the driver's certificate (`--driver-tls-ca`). */
  ca?: Buffer;
  /** Client certificate chain for mTLS (`--driver-tls-cert`). */
  cert?: Buffer;
  /** Client private key for mTLS (`--driver-tls-key`). */
  key?: Buffer;
}

/** How every driver connection of one process is made (the `--driver-*` flags). */
export interface ConnectionOptions {
  /** TLS (1.2 or newer) when set; cleartext HTTP/2 otherwise, only to local targets. */
  tls?: DriverTls;
  /** Sent as `authorization: Bearer <token>` on every RPC (`--driver-auth-token`). */
  authToken?: string;
}

/**
 * Raised when a target would be dialled in cleartext but is not loopback or a
 * unix socket (section 6 and 8.15). The message names `CLEARTEXT` and
 * `--driver-tls`, as the harness's does.
 */
export class CleartextRefusedError extends DriverConfigError {
  override name = "CleartextRefusedError";
  constructor(readonly target: string) {
    super(`refusing CLEARTEXT to non-loopback driver target ${JSON.stringify(target)}: enable driver TLS (--driver-tls)`);
  }
}

function tcpAuthority(t: Extract<DriverTarget, { kind: "tcp" }>, tls: boolean): string {
  const host = isIP(t.host) === 6 ? `[${t.host}]` : t.host;
  return `${tls ? "https" : "http"}://${host}:${t.port}`;
}

/**
 * Memory one HTTP/2 connection may hold for streams in flight, in MiB
 * (Node's `maxSessionMemory`). Node's default of 10 refuses new streams with
 * ENHANCE_YOUR_CALM once a few multi-MiB snapshots are in flight on the
 * shared connection; the real bound is the 65 MiB message limit times the
 * calls the process has in flight.
 */
export const SESSION_MEMORY_MIB = 64 * 1024;

function sessionOptions(t: DriverTarget, tls: DriverTls | undefined): ClientSessionOptions | SecureClientSessionOptions {
  const base = { maxSessionMemory: SESSION_MEMORY_MIB };
  const secure = tls === undefined ? undefined : { ca: tls.ca, cert: tls.cert, key: tls.key, minVersion: "TLSv1.2" as const };
  if (t.kind === "unix") {
    // grpc-go names unix targets "localhost" (authority and TLS server name).
    return {
      ...base,
      createConnection: () =>
        secure === undefined ? netConnect(t.path) : tlsConnect({ ...secure, path: t.path, servername: "localhost", ALPNProtocols: ["h2"] }),
    };
  }
  if (secure === undefined) return base;
  // Node refuses an IP literal as SNI; certificate checks still use the host.
  return isIP(t.host) === 0 ? { ...base, ...secure, servername: t.host } : { ...base, ...secure };
}

function bearer(token: string): Interceptor {
  return (next) => (req) => {
    req.header.set("authorization", `Bearer ${token}`);
    return next(req);
  };
}

/**
 * connect-node's session manager, with every HTTP/2 session it opens kept
 * from ending the process. When the peer is no gRPC server (a Redis port, say),
 * the session fails with a protocol error: the call in flight fails with it,
 * then the manager drops its own error listener, and the session emits the
 * error once more as it closes. With no listener left that `error` event
 * would end the process with a stack trace after the one-line message.
 *
 * It also notes whether the peer has spoken HTTP/2 at all ({@link peerSilent}).
 */
export class GuardedSessionManager extends Http2SessionManager {
  private readonly guarded = new WeakSet<Http2Session>();
  /** Sessions whose peer has sent its SETTINGS (an HTTP/2 server's first frame). */
  private readonly spoke = new WeakSet<Http2Session>();
  /**
   * True when the last stream closed on the newest connection before its
   * peer had sent any HTTP/2 frame: the peer closed the connection without a
   * word, as a TLS listener dialled in cleartext does (it reads no TLS
   * handshake and hangs up), where connect-node only says "stream closed
   * with error code CANCEL". Cleared when a new connection is opened and when
   * a peer sends its SETTINGS.
   */
  peerSilent = false;

  override async request(method: string, path: string, headers: OutgoingHttpHeaders, options: Omit<ClientSessionRequestOptions, "signal">): Promise<ClientHttp2Stream> {
    const stream = await super.request(method, path, headers, options);
    const session = stream.session;
    if (session === undefined) return stream;
    if (!this.guarded.has(session)) {
      this.guarded.add(session);
      // A new connection: whatever an earlier one did says nothing of this one.
      this.peerSilent = false;
      // The calls on the session see its errors; this listener only keeps the last one from being unhandled.
      session.on("error", () => undefined);
      // Attached before any I/O callback runs after the connection opened, so the peer's SETTINGS cannot have come yet.
      session.once("remoteSettings", () => {
        this.spoke.add(session);
        this.peerSilent = false;
      });
    }
    // Registered before connect-node's own listener, so the flag is set when the call's error is raised.
    stream.once("close", () => {
      if (!this.spoke.has(session)) this.peerSilent = true;
    });
    return stream;
  }
}

/**
 * True when `err` says the connection went away under the call: the stream
 * close connect-node reports (CANCEL) or a reset (ECONNRESET, EPIPE; which
 * one a TLS listener's hang-up gives depends on timing). Any other failure (a
 * refused connection, bytes that are no HTTP/2, a deadline) says more than
 * the silent-peer hint would.
 */
function hungUp(err: unknown): boolean {
  if (err instanceof ConnectError && /^http\/2 stream closed with error code CANCEL\b/.test(err.rawMessage)) return true;
  for (const e of errorChain(err)) {
    const code = (e as { code?: unknown }).code;
    if (code === "ECONNRESET" || code === "EPIPE") return true;
  }
  return false;
}

/**
 * Names the likely cause when a call on a cleartext connection failed
 * because the peer hung up without a word of HTTP/2
 * ({@link GuardedSessionManager.peerSilent}): the error becomes UNAVAILABLE
 * with the problem and its fix (clients/http2-errors.ts: "... or the driver
 * serves TLS (give --driver-tls-ca)"), where it read "http/2 stream closed
 * with error code CANCEL" (found by a fresh-eyes run).
 */
function namingSilentPeer(manager: GuardedSessionManager): Interceptor {
  return (next) => async (req) => {
    try {
      return await next(req);
    } catch (err) {
      if (!manager.peerSilent || !hungUp(err)) throw err;
      // The code http2-errors.ts recognises for a peer that does not speak HTTP/2.
      const silent = Object.assign(new Error("the connection closed before the driver sent any HTTP/2 frame", { cause: err }), { code: "ERR_HTTP2_ERROR" });
      throw new ConnectError(silent.message, Code.Unavailable, undefined, undefined, silent);
    }
  };
}

/**
 * The driver connections of one process: one HTTP/2 connection (gRPC
 * protocol) per distinct target string, shared by every client whose target
 * is equal, as the harness shares one grpc-go ClientConn (section 6).
 * Connections open lazily on the first RPC and are unref'd while idle.
 */
export class DriverConnections {
  private readonly pool = new Map<string, { manager: Http2SessionManager; transport: Transport }>();

  /** @throws DriverConfigError when an auth token is empty. */
  constructor(readonly options: ConnectionOptions = {}) {
    if (options.authToken !== undefined && options.authToken.trim() === "") throw new DriverConfigError("the driver auth token is empty");
  }

  /**
   * The shared transport for `target`.
   *
   * @throws DriverConfigError for a target that cannot be parsed, and
   *   {@link CleartextRefusedError} for a non-local target without TLS
   *   (with or without a token), before anything is dialled.
   */
  transport(target: string): Transport {
    const existing = this.pool.get(target);
    if (existing !== undefined) return existing.transport;
    const parsed = parseTarget(target);
    const tls = this.options.tls;
    if (tls === undefined && !parsed.local) throw new CleartextRefusedError(target);
    const baseUrl = parsed.kind === "unix" ? `${tls ? "https" : "http"}://localhost` : tcpAuthority(parsed, tls !== undefined);
    const manager = new GuardedSessionManager(baseUrl, {}, sessionOptions(parsed, tls));
    const transport = createGrpcTransport({
      baseUrl,
      sessionManager: manager,
      readMaxBytes: MAX_MESSAGE_BYTES,
      writeMaxBytes: MAX_MESSAGE_BYTES,
      interceptors: [...(tls === undefined ? [namingSilentPeer(manager)] : []), ...(this.options.authToken === undefined ? [] : [bearer(this.options.authToken)])],
    });
    this.pool.set(target, { manager, transport });
    return transport;
  }

  /** Number of distinct connections (targets) made so far. */
  get size(): number {
    return this.pool.size;
  }

  /** Closes every connection; calls still running end with CANCELLED. */
  close(): void {
    for (const { manager } of this.pool.values()) manager.abort();
    this.pool.clear();
  }
}
