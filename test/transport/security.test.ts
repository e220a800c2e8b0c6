import { beforeAll, describe, expect, test } from "vitest";
import * as grpc from "@grpc/grpc-js";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { startServer } from "../helpers/server.js";
import { grpcClient, MAX_MESSAGE_BYTES } from "../helpers/clients.js";
import { makePki, type TestPki } from "../helpers/certs.js";
import { rawGrpcClient, rawUnary } from "../helpers/raw-grpc.js";

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
});
