import * as grpc from "@grpc/grpc-js";
import { createServer, type Server, type Socket } from "node:net";
import { createServer as createTlsServer, type TLSSocket } from "node:tls";
import type { Logger } from "./logger.js";
import type { TlsMaterial } from "./tls.js";
import { logPeerTlsError, notePeers, peerAddress } from "./tls-peer.js";
import type { StartGate } from "./start-gate.js";

/**
 * A socket server (TCP or unix, cleartext or TLS; not yet listening) whose
 * connections are handed to a grpc-js server through its connection
 * injector. The process, not grpc-js, owns the TLS handshake, so a peer's TLS
 * mistake (no client certificate under mTLS, cleartext against a TLS
 * listener, a CA the client does not trust) is logged as one JSON warning
 * that names the likely cause (issue 10 deliverable 4). Keepalive, stream
 * limits and connection age apply as set in the grpc-js server's options;
 * the grpc-js server's shutdown closes the connections, {@link Server.close}
 * stops accepting new ones. Connections accepted before `gate` opens are held
 * until it does (the services are mounted) and closed if the start fails.
 *
 * @throws Error from node:tls when the certificate and key do not form a pair.
 */
export function grpcSocketServer(grpcServer: grpc.Server, tls: TlsMaterial | undefined, logger: Logger, gate: StartGate): Server {
  const injector = grpcServer.createConnectionInjector(grpc.ServerCredentials.createInsecure());
  const inject = (socket: Socket) =>
    gate.admit(
      () => injector.injectConnection(socket),
      () => socket.destroy(),
    );
  if (tls === undefined) return createServer(inject);
  const mtls = tls.clientCa !== undefined;
  const server = createTlsServer(
    { cert: tls.cert, key: tls.key, ca: tls.clientCa, requestCert: mtls, rejectUnauthorized: mtls, ALPNProtocols: ["h2"], minVersion: "TLSv1.2" },
    (socket: TLSSocket) => {
      if (socket.alpnProtocol === "h2") return inject(socket);
      logger.warn({ peer: peerAddress(socket, server), detail: String(socket.alpnProtocol) }, "refused a gRPC connection: the client did not offer HTTP/2 (ALPN h2); gRPC needs HTTP/2 over TLS");
      socket.destroy();
    },
  );
  notePeers(server);
  server.on("tlsClientError", (err: NodeJS.ErrnoException, socket: TLSSocket) => logPeerTlsError(logger, "gRPC", err, socket, server));
  return server;
}
