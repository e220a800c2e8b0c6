import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { writeFileSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { Code, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { Health, HealthCheckResponse_ServingStatus } from "../../gen/grpc/health/v1/health_pb.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { grpcClient, MAX_MESSAGE_BYTES } from "../helpers/clients.js";
import { expectCode } from "../helpers/errors.js";
import { makePki, type TestPki } from "../helpers/certs.js";
import { rawGrpcClient, rawUnary } from "../helpers/raw-grpc.js";
import { waitFor } from "../helpers/wait.js";

describe("bearer tokens (--auth-token-file, wire-contract section 6)", () => {
  let server: ServerProcess;
  let tokenFile: string;
  beforeAll(async () => {
    tokenFile = join(mkdtempSync(join(tmpdir(), "mecatl-auth-")), "tokens");
    writeFileSync(tokenFile, "# operators\ntok-123\n\ntok-456\n");
    server = await startServer(["session-store", "--store", "sqlite::memory:", "--auth-token-file", tokenFile]);
  });
  afterAll(() => server?.stop());

  test("a call without a token is UNAUTHENTICATED", async () => {
    await expectCode(grpcClient(SessionStoreService, server.address).capabilities({}), Code.Unauthenticated);
  });

  test("an unknown token is UNAUTHENTICATED", async () => {
    await expectCode(grpcClient(SessionStoreService, server.address, { token: "nope" }).capabilities({}), Code.Unauthenticated);
  });

  test("every listed token is accepted", async () => {
    for (const token of ["tok-123", "tok-456"]) {
      expect((await grpcClient(SessionStoreService, server.address, { token }).capabilities({})).contract).toBe("session-store/1");
    }
  });

  test("health needs no token", async () => {
    const res = await grpcClient(Health, server.address).check({ service: "" });
    expect(res.status).toBe(HealthCheckResponse_ServingStatus.SERVING);
  });

  test("the token file is reloaded when it changes", async () => {
    writeFileSync(tokenFile, "tok-rotated\n");
    const rotated = grpcClient(SessionStoreService, server.address, { token: "tok-rotated" });
    await waitFor(async () => rotated.capabilities({}).then(() => true, () => false), 10_000, "the rotated token to be accepted");
    await expectCode(grpcClient(SessionStoreService, server.address, { token: "tok-123" }).capabilities({}), Code.Unauthenticated);
  });
});

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
