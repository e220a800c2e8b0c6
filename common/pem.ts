/**
 * Reading PEM files named by flags (`--tls-cert`, `--tls-key`,
 * `--tls-client-ca`, `--redis-tls-ca`, ...) and checking, before anything
 * uses them, that they hold what the flag needs: certificates that parse, a
 * private key that parses, a key that matches its certificate. Each error is
 * one line naming the flag, the file and the fix (issue 10, deliverable 4).
 * Shared by the server and the clients, hence here and not in services/.
 */
import { readFileSync } from "node:fs";
import { X509Certificate, createPrivateKey, type KeyObject } from "node:crypto";

/** The error class a caller wants its configuration problems thrown as (e.g. `StartupError`). */
export type ErrorClass = new (message: string) => Error;

/** One `-----BEGIN label----- ... -----END label-----` block, as text. */
interface PemBlock {
  label: string;
  text: string;
}

const PEM_BLOCK = /-----BEGIN ([A-Z0-9 ]+)-----[\s\S]*?-----END \1-----/g;

function pemBlocks(text: string): PemBlock[] {
  return [...text.matchAll(PEM_BLOCK)].map((m) => ({ label: m[1]!, text: m[0] }));
}

function describe(blocks: PemBlock[]): string {
  return blocks.length === 0 ? "no PEM block" : blocks.map((b) => b.label).join(", ");
}

/** Reads `file` as text; a truncated block (BEGIN without END) is an error. */
function readPemText(file: string, flag: string, E: ErrorClass): { bytes: Buffer; blocks: PemBlock[] } {
  let bytes: Buffer;
  try {
    bytes = readFileSync(file);
  } catch (err) {
    throw new E(`cannot read ${flag} ${file}: ${(err as Error).message}`);
  }
  const text = bytes.toString("latin1");
  const blocks = pemBlocks(text);
  if ((text.match(/-----BEGIN /g) ?? []).length !== blocks.length) {
    throw new E(`${flag} ${file} has a PEM block without its END line (truncated or damaged); give the complete PEM file`);
  }
  return { bytes, blocks };
}

/** What {@link readCertificates} returns. */
export interface CertificateFile {
  /** The file's bytes, for TLS libraries. */
  pem: Buffer;
  /** Every `CERTIFICATE` block, parsed, in file order (a chain's leaf first). */
  certificates: X509Certificate[];
}

/**
 * Reads a PEM certificate, chain or CA bundle: at least one `CERTIFICATE`
 * block, every one of which must parse as X.509 (blocks with other labels are
 * ignored, as OpenSSL ignores them).
 *
 * @param flag the flag that named the file, for messages.
 * @param E the class of the error to throw.
 * @throws E when the file cannot be read, holds no certificate (say a key), or
 *   holds a truncated or invalid one.
 */
export function readCertificates(file: string, flag: string, E: ErrorClass): CertificateFile {
  const { bytes, blocks } = readPemText(file, flag, E);
  const certBlocks = blocks.filter((b) => b.label === "CERTIFICATE");
  if (certBlocks.length === 0) {
    throw new E(`${flag} ${file} holds no PEM certificate (found ${describe(blocks)}); give a file with "-----BEGIN CERTIFICATE-----" blocks`);
  }
  const certificates = certBlocks.map((b, i) => {
    try {
      return new X509Certificate(b.text);
    } catch (err) {
      throw new E(`${flag} ${file}: certificate ${i + 1} is not a valid X.509 certificate (${(err as Error).message}); give a valid PEM certificate`);
    }
  });
  return { pem: bytes, certificates };
}

/** What {@link readPrivateKey} returns. */
export interface PrivateKeyFile {
  /** The file's bytes, for TLS libraries. */
  pem: Buffer;
  key: KeyObject;
}

/**
 * Reads an unencrypted PEM private key (PKCS#8, PKCS#1 or SEC 1: the first
 * block whose label ends in `PRIVATE KEY`).
 *
 * @throws E when the file cannot be read, holds no private key (say a
 *   certificate), or holds an encrypted or invalid one.
 */
export function readPrivateKey(file: string, flag: string, E: ErrorClass): PrivateKeyFile {
  const { bytes, blocks } = readPemText(file, flag, E);
  const keyBlock = blocks.find((b) => b.label.endsWith("PRIVATE KEY"));
  if (keyBlock === undefined) {
    throw new E(`${flag} ${file} holds no PEM private key (found ${describe(blocks)}); give a file with a "-----BEGIN PRIVATE KEY-----" block`);
  }
  if (keyBlock.label === "ENCRYPTED PRIVATE KEY" || /Proc-Type: 4,ENCRYPTED/.test(keyBlock.text)) {
    throw new E(`${flag} ${file} holds an encrypted private key; give it unencrypted (openssl pkey -in ${file} -out key.pem) and protect the file instead`);
  }
  try {
    return { pem: bytes, key: createPrivateKey(keyBlock.text) };
  } catch (err) {
    throw new E(`${flag} ${file}: the private key is not valid (${(err as Error).message}); give a valid PEM private key`);
  }
}

/**
 * Reads a certificate chain and its private key and checks that the key
 * belongs to the chain's first (leaf) certificate, and that this certificate
 * is valid now.
 *
 * @throws E as {@link readCertificates} and {@link readPrivateKey} do, or when
 *   the key does not match the certificate, or the certificate has expired
 *   or is not valid yet.
 */
export function readKeyPair(
  cert: { file: string; flag: string },
  key: { file: string; flag: string },
  E: ErrorClass,
): { cert: Buffer; key: Buffer } {
  const chain = readCertificates(cert.file, cert.flag, E);
  const privateKey = readPrivateKey(key.file, key.flag, E);
  const leaf = chain.certificates[0]!;
  if (!leaf.checkPrivateKey(privateKey.key)) {
    throw new E(`${key.flag} ${key.file} does not match the certificate in ${cert.flag} ${cert.file}; give the key the certificate was issued for`);
  }
  // Every peer would refuse it in the handshake, with no word on this side: say so now.
  const now = Date.now();
  if (now > Date.parse(leaf.validTo)) throw new E(`${cert.flag} ${cert.file}: the certificate expired on ${leaf.validTo}; renew it`);
  if (now < Date.parse(leaf.validFrom)) throw new E(`${cert.flag} ${cert.file}: the certificate is not valid before ${leaf.validFrom}; check this host's clock`);
  return { cert: chain.pem, key: privateKey.pem };
}
