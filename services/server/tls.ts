import { readFileSync } from "node:fs";
import { StartupError } from "../storage/redis-connection.js";

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

function readPem(file: string, flag: string): Buffer {
  try {
    return readFileSync(file);
  } catch (err) {
    throw new StartupError(`cannot read ${flag} ${file}: ${(err as Error).message}`);
  }
}

/**
 * Reads the certificate, key and client CA.
 *
 * @throws StartupError naming the flag whose file cannot be read.
 */
export function readTls(files: TlsFiles): TlsMaterial {
  return {
    cert: readPem(files.certFile, "--tls-cert"),
    key: readPem(files.keyFile, "--tls-key"),
    clientCa: files.clientCaFile === undefined ? undefined : readPem(files.clientCaFile, "--tls-client-ca"),
  };
}
