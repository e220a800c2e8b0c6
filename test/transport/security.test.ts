import { beforeAll, describe, expect, test } from "vitest";
import * as grpc from "@grpc/grpc-js";
import { Code, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { startServer } from "../helpers/server.js";
import { grpcClient, MAX_MESSAGE_BYTES } from "../helpers/clients.js";
import { makePki, type TestPki } from "../helpers/certs.js";
import { rawGrpcClient, rawUnary } from "../helpers/raw-grpc.js";
import { runCli } from "../helpers/cli.js";
import { openDriverClients } from "../../clients/factory.js";
import { InfrastructureError } from "../../clients/errors.js";

describe("TLS and mTLS", () => {
  let pki: TestPki;
  beforeAll(() => {
    pki = makePki();
  });

  function tlsClient(address: string, withClientCert: boolean) {
    return createClient(
      SessionStoreService,
      createGrpcTransport({
        baseUrl: `https://${address.replace("127.0.0.1", "localhost")}`,
        readMaxBytes: MAX_MESSAGE_BYTES,
        writeMaxBytes: MAX_MESSAGE_BYTES,
        nodeOptions: {
          ca: pki.read(pki.caCert),
          ...(withClientCert ? { cert: pki.read(pki.clientCert), key: pki.read(pki.clientKey) } : {}),
        },
      }),
    );
  }

  test("a TLS listener serves clients that trust its CA and refuses cleartext", async () => {
    const server = await startServer(["session-store", "--store", "sqlite::memory:", "--tls-cert", pki.serverCert, "--tls-key", pki.serverKey]);
    try {
      expect((await tlsClient(server.address, false).capabilities({})).contract).toBe("session-store/1");
      // Which error a client library reports for a failed handshake is its own business; it must fail.
      await expect(grpcClient(SessionStoreService, server.address).capabilities({})).rejects.toThrow();
    } finally {
      await server.stop();
    }
  });

  test("with --tls-client-ca a client certificate is required", async () => {
    const server = await startServer(["session-store", "--store", "sqlite::memory:", "--tls-cert", pki.serverCert, "--tls-key", pki.serverKey, "--tls-client-ca", pki.caCert]);
    try {
      expect((await tlsClient(server.address, true).capabilities({})).contract).toBe("session-store/1");
      await expect(tlsClient(server.address, false).capabilities({})).rejects.toThrow();
      const raw = rawGrpcClient(
        SessionStoreService,
        server.address.replace("127.0.0.1", "localhost"),
        grpc.credentials.createSsl(pki.read(pki.caCert), pki.read(pki.clientKey), pki.read(pki.clientCert)),
      );
      expect((await rawUnary(raw, SessionStoreService.method.capabilities, {})).contract).toBe("session-store/1");
      raw.close();
    } finally {
      await server.stop();
    }
  });

  test("a client that does not trust the server's CA fails with UNAVAILABLE naming the TLS problem, in the clients and the CLI (issue 14)", async () => {
    const other = makePki();
    const server = await startServer(["session-store", "--store", "sqlite::memory:", "--tls-cert", pki.serverCert, "--tls-key", pki.serverKey]);
    const target = server.address.replace("127.0.0.1", "localhost");
    try {
      const err = await openDriverClients({ sessionStoreUrl: target, tls: { ca: other.read(other.caCert) } }).then(
        (c) => (c.close(), undefined),
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(InfrastructureError);
      expect((err as InfrastructureError).code).toBe(Code.Unavailable);
      expect((err as Error).message).toMatch(/: Unavailable: TLS handshake with the driver failed: the driver's certificate is not trusted \(.+\); give the CA that signed it with --driver-tls-ca \([A-Z_]+\)$/);
      const cli = await runCli(["sessions", "list", "--session-store-url", target, "--driver-tls", "--driver-tls-ca", other.caCert]);
      expect(cli.code).toBe(1);
      expect(cli.stderr).toContain("failed: Unavailable: TLS handshake with the driver failed: the driver's certificate is not trusted");
      // A client that dials TLS to a cleartext listener is told so as well.
      const clear = await startServer(["session-store", "--store", "sqlite::memory:"]);
      try {
        const toClear = await runCli(["sessions", "list", "--session-store-url", clear.address, "--driver-tls", "--driver-tls-ca", pki.caCert]);
        expect([toClear.code, toClear.stderr]).toEqual([1, expect.stringContaining("Unavailable: TLS handshake with the driver failed: the driver did not answer in TLS")]);
      } finally {
        await clear.stop();
      }
    } finally {
      await server.stop();
    }
  });
});
