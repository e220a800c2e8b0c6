import { readFileSync } from "node:fs";
import * as grpc from "@grpc/grpc-js";
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
 * @param flags the flags' common prefix, for messages: `--tls` (the gRPC and
 *   Connect listeners) or `--metrics-tls` (the metrics listener).
 * @throws StartupError naming the flag whose file cannot be read.
 */
export function readTls(files: TlsFiles, flags = "--tls"): TlsMaterial {
  return {
    cert: readPem(files.certFile, `${flags}-cert`),
    key: readPem(files.keyFile, `${flags}-key`),
    clientCa: files.clientCaFile === undefined ? undefined : readPem(files.clientCaFile, `${flags}-client-ca`),
  };
}

/**
 * grpc-js server credentials: TLS (grpc-js negotiates TLS 1.2 or newer) when
 * material is given, requiring client certificates when a client CA is set;
 * cleartext HTTP/2 otherwise.
 *
 * @throws StartupError when the certificate and key do not form a valid pair.
 */
export function grpcCredentials(tls: TlsMaterial | undefined): grpc.ServerCredentials {
  if (tls === undefined) return grpc.ServerCredentials.createInsecure();
  try {
    return grpc.ServerCredentials.createSsl(tls.clientCa ?? null, [{ cert_chain: tls.cert, private_key: tls.key }], tls.clientCa !== undefined);
  } catch (err) {
    throw new StartupError(`invalid --tls-cert/--tls-key: ${(err as Error).message}`);
  }
}
