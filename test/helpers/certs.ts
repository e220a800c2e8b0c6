import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** PEM files of a throwaway PKI made by `openssl` for one test file. */
export interface TestPki {
  dir: string;
  caCert: string;
  serverCert: string;
  serverKey: string;
  clientCert: string;
  clientKey: string;
  /**
   * Certificate and key for localhost / 127.0.0.1 that serve both ways
   * (serverAuth and clientAuth), as a Redis Cluster node's must: it accepts
   * its peers' connections and opens its own to them over the cluster bus.
   */
  peerCert: string;
  peerKey: string;
  /** File contents, for clients. */
  read(file: string): Buffer;
}

function openssl(dir: string, args: string[]): void {
  execFileSync("openssl", args, { cwd: dir, stdio: "pipe" });
}

/**
 * Creates a CA, a server certificate for `localhost` / 127.0.0.1 / ::1, a
 * client certificate and a peer certificate (both uses), all signed by the CA
 * (EC P-256, valid one day).
 */
export function makePki(): TestPki {
  const dir = mkdtempSync(join(tmpdir(), "mecatl-pki-"));
  openssl(dir, ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "1", "-subj", "/CN=mecatl-test-ca"]);
  writeFileSync(join(dir, "server.ext"), "subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1\nextendedKeyUsage=serverAuth\n");
  writeFileSync(join(dir, "client.ext"), "extendedKeyUsage=clientAuth\n");
  writeFileSync(join(dir, "peer.ext"), "subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1\nextendedKeyUsage=serverAuth,clientAuth\n");
  for (const who of ["server", "client", "peer"]) {
    openssl(dir, ["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", `${who}.key`, "-out", `${who}.csr`, "-subj", `/CN=mecatl-test-${who}`]);
    openssl(dir, ["x509", "-req", "-in", `${who}.csr`, "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", `${who}.pem`, "-days", "1", "-extfile", `${who}.ext`]);
  }
  return {
    dir,
    caCert: join(dir, "ca.pem"),
    serverCert: join(dir, "server.pem"),
    serverKey: join(dir, "server.key"),
    clientCert: join(dir, "client.pem"),
    clientKey: join(dir, "client.key"),
    peerCert: join(dir, "peer.pem"),
    peerKey: join(dir, "peer.key"),
    read: (file) => readFileSync(file),
  };
}
