import type { AddressInfo } from "node:net";
import type { Logger } from "./logger.js";

/**
 * Words for a TLS handshake that a peer got wrong, from the error Node's TLS
 * socket reports (OpenSSL reason codes), naming the likely cause and the
 * client-side fix (issue 10 deliverable 4). The raw code is logged beside it.
 *
 * @param verifyError the X.509 verification code of the client's certificate
 *   (`authorizationError`, e.g. `UNABLE_TO_VERIFY_LEAF_SIGNATURE`) when it
 *   failed: node:tls then closes the connection itself and reports only a
 *   hang-up (ECONNRESET), so the code is the real cause (issue 14).
 */
export function explainPeerTlsError(err: NodeJS.ErrnoException, verifyError?: string): string {
  if (verifyError !== undefined) {
    if (/EXPIRED|NOT_YET_VALID/.test(verifyError)) return `the client's certificate is outside its validity period (${verifyError})`;
    return `the client's certificate is not signed by the --tls-client-ca authority (${verifyError}); give the client a certificate that CA signed, or add its CA to --tls-client-ca`;
  }
  const code = err.code ?? "";
  const text = `${code} ${err.message}`;
  if (/WRONG_VERSION_NUMBER|HTTP_REQUEST|UNKNOWN_PROTOCOL|PACKET_LENGTH_TOO_LONG|RECORD_LAYER_FAILURE|http request/i.test(text)) {
    return "the client spoke cleartext to this TLS listener; use TLS on the client (the harness and this CLI: --driver-tls with --driver-tls-ca)";
  }
  if (/PEER_DID_NOT_RETURN_A_CERTIFICATE|CERTIFICATE_REQUIRED/i.test(text)) {
    return "the client sent no certificate, and this listener requires one (--tls-client-ca); give the client a certificate and key (--driver-tls-cert, --driver-tls-key)";
  }
  if (/UNKNOWN_CA|BAD_CERTIFICATE|CERTIFICATE_UNKNOWN|DECRYPT_ERROR/i.test(text)) {
    return "the client does not trust this server's certificate; give the client the CA that signed --tls-cert (--driver-tls-ca)";
  }
  if (/VERIFY_FAILED|UNABLE_TO_GET_ISSUER|SELF_SIGNED|CERT_/i.test(text)) {
    return "the client's certificate is not signed by the --tls-client-ca authority";
  }
  if (/NO_SHARED_CIPHER|UNSUPPORTED_PROTOCOL|VERSION_TOO_LOW|PROTOCOL_VERSION/i.test(text)) {
    return "the client offers no TLS version or cipher this server accepts (TLS 1.2 or newer)";
  }
  if (/ECONNRESET|EPIPE/.test(code)) return "the client closed the connection during the TLS handshake (often: it rejected this server's certificate)";
  return "the TLS handshake failed";
}

/** A server-side TLS socket as node:tls hands it to `tlsClientError` (its handshake failed). */
export interface FailedTlsSocket {
  remoteAddress?: string;
  remotePort?: number;
  /** Why the client's certificate failed verification (node:tls `authorizationError`), when it did. */
  authorizationError?: string | Error | null;
}

/** The peer address of every TCP connection a TLS listener accepted, noted on acceptance ({@link notePeers}). */
const acceptedPeers = new WeakMap<object, string>();

/**
 * Notes the peer address of each connection `listener` accepts, before any
 * TLS byte is read, so that a handshake failure can still name the peer: by
 * the time node:tls reports one, the TLS socket and the TCP socket beneath
 * it have often lost their handles, and with them their addresses (issue 14:
 * such peers were logged as "unix").
 */
export function notePeers(listener: { on(event: "connection", fn: (socket: { remoteAddress?: string; remotePort?: number }) => void): unknown }): void {
  listener.on("connection", (socket) => {
    if (socket.remoteAddress !== undefined) acceptedPeers.set(socket, `${socket.remoteAddress}:${socket.remotePort}`);
  });
}

/**
 * The peer of a listener's socket, for logs: `unix:<path>` on a unix-socket
 * listener, else `address:port`, from the socket itself or, once it is
 * closed, from what {@link notePeers} noted for the TCP socket beneath it
 * (node:tls keeps that as the TLS socket's `_parent`). `unknown` when
 * neither is known.
 */
export function peerAddress(socket: FailedTlsSocket, listener: { address(): AddressInfo | string | null }): string {
  const bound = listener.address();
  if (typeof bound === "string") return `unix:${bound}`;
  if (socket.remoteAddress !== undefined) return `${socket.remoteAddress}:${socket.remotePort}`;
  const parent = (socket as { _parent?: object })._parent;
  return acceptedPeers.get(parent ?? socket) ?? "unknown";
}

/**
 * Logs one warning for a peer's failed TLS handshake on a listener (`what`:
 * `gRPC` or `Connect`): the peer's address, Node's error code as `detail`,
 * the certificate verification code as `verifyError` when there is one, and
 * the likely cause in words ({@link explainPeerTlsError}).
 */
export function logPeerTlsError(logger: Logger, what: string, err: NodeJS.ErrnoException, socket: FailedTlsSocket, listener: { address(): AddressInfo | string | null }): void {
  const verifyError = socket.authorizationError ? String((socket.authorizationError as { code?: string }).code ?? socket.authorizationError) : undefined;
  logger.warn({ peer: peerAddress(socket, listener), detail: err.code ?? err.message, verifyError }, `refused a ${what} connection: ${explainPeerTlsError(err, verifyError)}`);
}
