import { errorChain } from "./error-chain.js";

/**
 * Node's codes for a server certificate the client could not verify (the
 * X.509 verification codes node:tls reports, plus its host-name check).
 */
const UNTRUSTED_CERTIFICATE = new Set([
  "UNABLE_TO_GET_ISSUER_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "UNABLE_TO_DECRYPT_CERT_SIGNATURE",
  "UNABLE_TO_DECODE_ISSUER_PUBLIC_KEY",
  "CERT_SIGNATURE_FAILURE",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "CERT_CHAIN_TOO_LONG",
  "CERT_REVOKED",
  "INVALID_CA",
  "PATH_LENGTH_EXCEEDED",
  "INVALID_PURPOSE",
  "CERT_UNTRUSTED",
  "CERT_REJECTED",
]);

/** The words OpenSSL puts in its message between the function name and the source file (`...:SSL routines:ssl3_get_record:wrong version number:...`). */
function opensslReason(message: string): string {
  return /SSL routines:[^:]*:([^:]+):/.exec(message)?.[1] ?? message.trim();
}

/**
 * What went wrong when a call failed because the TLS handshake with the
 * driver did, in words that name the likely fix, or undefined when `err`
 * (or an error in its `cause` chain) is no TLS failure. grpc-go, which the
 * harness uses, reports such failures as UNAVAILABLE, and so does
 * errors.ts `classify` with this message (issue 14; connect-node says
 * INTERNAL, which means a bug).
 *
 * The flags named are the harness's own (`--driver-tls-ca`,
 * `--driver-tls-cert`, `--driver-tls-key`), which the CLI shares.
 */
export function tlsHandshakeProblem(err: unknown): string | undefined {
  for (const e of errorChain(err)) {
    const code = (e as { code?: unknown }).code;
    if (typeof code !== "string") continue;
    const what = explain(code, e.message);
    if (what !== undefined) return `TLS handshake with the driver failed: ${what} (${code})`;
  }
  return undefined;
}

function explain(code: string, message: string): string | undefined {
  if (code === "CERT_HAS_EXPIRED" || code === "CERT_NOT_YET_VALID") return `the driver's certificate is outside its validity period: ${message}`;
  if (code === "ERR_TLS_CERT_ALTNAME_INVALID" || code === "HOSTNAME_MISMATCH") return `the driver's certificate does not name the host dialled: ${message}; dial a name or address the certificate holds`;
  if (UNTRUSTED_CERTIFICATE.has(code)) return `the driver's certificate is not trusted (${message}); give the CA that signed it with --driver-tls-ca`;
  if (!code.startsWith("ERR_SSL_")) return undefined;
  const reason = opensslReason(message);
  if (/CERTIFICATE_REQUIRED/.test(code)) return `the driver requires a client certificate (${reason}); give one with --driver-tls-cert and --driver-tls-key`;
  if (/ALERT_(UNKNOWN_CA|BAD_CERTIFICATE|CERTIFICATE_UNKNOWN|UNSUPPORTED_CERTIFICATE|CERTIFICATE_EXPIRED|CERTIFICATE_REVOKED|DECRYPT_ERROR|ACCESS_DENIED)/.test(code)) {
    return `the driver refused this client's certificate (${reason}); use one signed by the CA the driver trusts (its --tls-client-ca)`;
  }
  if (/WRONG_VERSION_NUMBER|PACKET_LENGTH_TOO_LONG|UNKNOWN_PROTOCOL|RECORD_LAYER_FAILURE|HTTP_REQUEST/.test(code)) {
    return `the driver did not answer in TLS (${reason}); it may serve cleartext (drop --driver-tls) or another program listens there`;
  }
  if (/PROTOCOL_VERSION|UNSUPPORTED_PROTOCOL|NO_PROTOCOLS|NO_SHARED_CIPHER/.test(code)) return `no TLS version or cipher suits both sides (${reason})`;
  if (/HANDSHAKE_FAILURE/.test(code)) return `the driver refused the handshake (${reason}): it may require a client certificate (--driver-tls-cert, --driver-tls-key), or no TLS version or cipher suits both sides`;
  return reason;
}
