import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { rmSync } from "node:fs";
import { Code } from "@connectrpc/connect";
import { Health, HealthCheckResponse_ServingStatus as Status } from "../../gen/grpc/health/v1/health_pb.js";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { spawnRedis, type SpawnedRedis } from "../helpers/redis-server.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { grpcClient } from "../helpers/clients.js";
import { makePki, type TestPki } from "../helpers/certs.js";
import { expectCode } from "../helpers/errors.js";
import { waitFor } from "../helpers/wait.js";

describe("--health-listen: health for Kubernetes gRPC probes beside a TLS listener", () => {
  let redis: SpawnedRedis;
  let pki: TestPki;
  let server: ServerProcess;
  beforeAll(async () => {
    redis = await spawnRedis();
    pki = makePki();
    server = await startServer(["--store", redis.url, "--tls-cert", pki.serverCert, "--tls-key", pki.serverKey, "--health-listen", "127.0.0.1:0"]);
  });
  afterAll(async () => {
    await server?.stop();
    await redis?.stop();
    rmSync(pki.dir, { recursive: true, force: true });
  });

  test("answers grpc.health.v1 in cleartext (as the kubelet asks) and nothing else", async () => {
    expect(server.healthAddress).toMatch(/^127\.0\.0\.1:\d+$/);
    const health = grpcClient(Health, server.healthAddress!);
    for (const service of ["", "liveness", "mecatl.driver.v1.SessionStoreService", "mecatl.driver.v1.ScheduleStoreService"]) {
      expect((await health.check({ service })).status, service).toBe(Status.SERVING);
    }
    await expectCode(grpcClient(SessionStoreService, server.healthAddress!).list({}), Code.Unimplemented);
    // The main listener stays TLS-only.
    await expect(grpcClient(Health, server.address).check({ service: "" })).rejects.toThrow();
  });

  test("readiness follows the store; liveness does not", async () => {
    const health = grpcClient(Health, server.healthAddress!);
    await redis.kill();
    await waitFor(async () => (await health.check({ service: "" })).status === Status.NOT_SERVING, 10_000, "NOT_SERVING after Redis died");
    expect((await health.check({ service: "liveness" })).status).toBe(Status.SERVING);
    await redis.restart();
    await waitFor(async () => (await health.check({ service: "" })).status === Status.SERVING, 15_000, "SERVING after Redis restarted");
  });
});
