import { StartupError } from "../storage/redis-connection.js";
import { readCertificates, readKeyPair } from "../../common/pem.js";

/** Server TLS files from `--tls-cert`, `--tls-key` and optional `--tls-client-ca`. */
export interface TlsFiles {
  certFile: string;
  keyFile: string;
  /** When set, clients must present a certificate signed by this CA (mTLS). */
  clientCaFile?: string;
}

/** PEM contents of {@link TlsFiles}. */
export interface TlsMaterial {
  cert: Buffer;
  key: Buffer;
  clientCa?: Buffer;
}

/**
 * Reads the certificate chain, key and client CA, and checks each before any
 * listener uses it: every file must hold what its flag needs (certificates
 * that parse, an unencrypted private key) and the key must belong to the
 * chain's first certificate (issue 10, deliverable 4).
 *
 * @throws StartupError naming the flag, the file and the fix.
 */
export function readTls(files: TlsFiles): TlsMaterial {
  const pair = readKeyPair({ file: files.certFile, flag: "--tls-cert" }, { file: files.keyFile, flag: "--tls-key" }, StartupError);
  return {
    ...pair,
    clientCa: files.clientCaFile === undefined ? undefined : readCertificates(files.clientCaFile, "--tls-client-ca", StartupError).pem,
  };
}
