/**
 * Words for a TLS handshake that a peer got wrong, from the error Node's TLS
 * socket reports (OpenSSL reason codes), naming the likely cause and the
 * client-side fix (issue 10 deliverable 4). The raw code is logged beside it.
 */
export function explainPeerTlsError(err: NodeJS.ErrnoException): string {
  const code = err.code ?? "";
  const text = `${code} ${err.message}`;
  if (/WRONG_VERSION_NUMBER|HTTP_REQUEST|UNKNOWN_PROTOCOL|PACKET_LENGTH_TOO_LONG|RECORD_LAYER_FAILURE|http request/i.test(text)) {
    return "the client spoke cleartext to this TLS listener; use TLS on the client (--driver-tls, or an https:// / grpcs target)";
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
