import type { Server as HttpServer } from "node:http";
import type { Http2SecureServer, ServerHttp2Session } from "node:http2";
import type { Socket } from "node:net";
import type { Logger } from "./logger.js";

/** The keepalive settings of the Connect listener: those of the gRPC listener (`--keepalive-time`, `--keepalive-timeout`). */
export interface ConnectKeepalive {
  /** Milliseconds between two pings of one HTTP/2 connection, and the idle time before TCP keepalive probes start. */
  keepaliveTimeMs: number;
  /** Milliseconds an HTTP/2 ping may go unanswered before the connection and its streams are closed. */
  keepaliveTimeoutMs: number;
}

/**
 * Dead-peer detection on the Connect listener (issue 9 deliverable 4), as
 * grpc-js does it on the gRPC listener:
 *
 * - every HTTP/2 session (the TLS listener, ALPN `h2`; the cleartext listener
 *   speaks HTTP/1.1 only) is pinged `keepaliveTimeMs` after the previous ping
 *   was answered; a ping unanswered after `keepaliveTimeoutMs` destroys the
 *   session, so its streams end (follow streams give back their
 *   `--max-followers` slots) within keepalive time plus timeout;
 * - every connection, HTTP/1.1 ones included, has TCP keepalive on, its
 *   probes starting after `keepaliveTimeMs` of silence. HTTP/1.1 has no ping
 *   of its own: a peer that vanished without a FIN is found only when the
 *   kernel's probes (interval and count from the OS) go unanswered, and
 *   never when a userspace proxy holds the other end of the TCP connection.
 */
export function watchConnectPeers(server: HttpServer | Http2SecureServer, keepalive: ConnectKeepalive, logger: Logger): void {
  server.on("connection", (socket: Socket) => socket.setKeepAlive(true, keepalive.keepaliveTimeMs));
  server.on("session", (session: ServerHttp2Session) => pingUntilSilent(session, keepalive, logger));
}

/** Pings `session` every `keepaliveTimeMs` and destroys it when a ping is not answered within `keepaliveTimeoutMs`. */
function pingUntilSilent(session: ServerHttp2Session, keepalive: ConnectKeepalive, logger: Logger): void {
  let next: NodeJS.Timeout | undefined;
  const ping = () => {
    if (session.closed || session.destroyed) return;
    const deadline = setTimeout(() => {
      logger.info({ peer: `${session.socket?.remoteAddress}:${session.socket?.remotePort}`, timeoutMs: keepalive.keepaliveTimeoutMs }, "closed a Connect connection: its keepalive ping went unanswered");
      session.destroy();
    }, keepalive.keepaliveTimeoutMs).unref();
    session.ping((err) => {
      clearTimeout(deadline);
      if (err === null) next = setTimeout(ping, keepalive.keepaliveTimeMs).unref();
    });
  };
  next = setTimeout(ping, keepalive.keepaliveTimeMs).unref();
  session.once("close", () => clearTimeout(next));
}
