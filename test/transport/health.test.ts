import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Code, ConnectError } from "@connectrpc/connect";
import { Health, HealthCheckResponse_ServingStatus as Status } from "../../gen/grpc/health/v1/health_pb.js";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { spawnRedis, type SpawnedRedis } from "../helpers/redis-server.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { grpcClient } from "../helpers/clients.js";
import { expectCode, expectFailure } from "../helpers/errors.js";
import { waitFor } from "../helpers/wait.js";

describe("grpc.health.v1 follows the backend", () => {
  let redis: SpawnedRedis;
  let server: ServerProcess;
  beforeAll(async () => {
    redis = await spawnRedis();
    server = await startServer(["session-store", "--store", redis.url]);
  });
  afterAll(async () => {
    await server?.stop();
    await redis?.stop();
  });

  test("Check answers per service and overall; unknown names are NOT_FOUND", async () => {
    const health = grpcClient(Health, server.address);
    expect((await health.check({ service: "" })).status).toBe(Status.SERVING);
    expect((await health.check({ service: "mecatl.driver.v1.SessionStoreService" })).status).toBe(Status.SERVING);
    await expectCode(health.check({ service: "no.such.Service" }), Code.NotFound);
  });

  test("NOT_SERVING while Redis is down, SERVING again after it restarts; Watch sees both", async () => {
    const health = grpcClient(Health, server.address);
    const seen: Status[] = [];
    const abort = new AbortController();
    const watching = (async () => {
      try {
        for await (const r of health.watch({ service: "mecatl.driver.v1.SessionStoreService" }, { signal: abort.signal })) seen.push(r.status);
        return "stream ended";
      } catch (err) {
        // Cancelled at the end of the test, and only then: the outage must not end the Watch.
        return abort.signal.aborted ? Code[ConnectError.from(err).code] : `ended before the abort: ${String(err)}`;
      }
    })();
    await waitFor(() => seen.includes(Status.SERVING), 5000, "Watch to report SERVING");
    await redis.kill();
    await waitFor(async () => (await health.check({ service: "" })).status === Status.NOT_SERVING, 10_000, "NOT_SERVING after Redis died");
    const down = await expectFailure(grpcClient(SessionStoreService, server.address).list({}));
    // An unreachable Redis is UNAVAILABLE, never INTERNAL (issue 9).
    expect(Code[down.code]).toBe(Code[Code.Unavailable]);
    await redis.restart();
    await waitFor(async () => (await health.check({ service: "" })).status === Status.SERVING, 15_000, "SERVING after Redis restarted");
    await waitFor(() => seen.lastIndexOf(Status.SERVING) > seen.indexOf(Status.NOT_SERVING) && seen.includes(Status.NOT_SERVING), 5000, "Watch to report NOT_SERVING then SERVING");
    expect((await grpcClient(SessionStoreService, server.address).list({})).sessions).toEqual([]);
    abort.abort();
    expect(await watching).toBe("Canceled");
  });
});
