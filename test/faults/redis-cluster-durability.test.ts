/**
 * Durability on every primary of a Redis Cluster (issue 13, deliverable 3):
 * the `appendfsync always` check runs on every primary and on a replica
 * promoted by a failover, a write to a primary not found durable is refused
 * (nothing written) while the others' slots take writes, and health is
 * NOT_SERVING while a slot has no reachable primary or a primary is not
 * durable.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Code } from "@connectrpc/connect";
import { Health, HealthCheckResponse_ServingStatus as Status } from "../../gen/grpc/health/v1/health_pb.js";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { fileCluster } from "../helpers/backends.js";
import { sessionIdOn, type ClusterNode, type SpawnedCluster } from "../helpers/redis-cluster.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { grpcClient } from "../helpers/clients.js";
import { expectCode } from "../helpers/errors.js";
import { waitFor } from "../helpers/wait.js";
import { METRICS_FLAGS, metricValue } from "../helpers/metrics.js";

const snap = { format: "sessnap-json/1", payload: new TextEncoder().encode("{}") };

/** Sets `appendfsync` on a node. */
async function setFsync(node: ClusterNode, value: string): Promise<void> {
  const c = node.client();
  try {
    await c.config("SET", "appendfsync", value);
  } finally {
    c.disconnect();
  }
}

describe("durability on every primary of a Redis Cluster", () => {
  let cluster: SpawnedCluster;
  let server: ServerProcess;
  let sessions: ReturnType<typeof grpcClient<typeof SessionStoreService>>;
  let health: ReturnType<typeof grpcClient<typeof Health>>;
  const status = async () => (await health.check({ service: "" })).status;

  beforeAll(async () => {
    cluster = await fileCluster();
    server = await startServer(["session-store", "--store", cluster.url, "--store-timeout", "2s", ...METRICS_FLAGS]);
    sessions = grpcClient(SessionStoreService, server.address);
    health = grpcClient(Health, server.address);
  });
  afterAll(async () => {
    await server?.stop();
  });

  test("a primary found not durable: NOT_SERVING, its slots refuse writes (nothing written), the other primaries' slots take them", async () => {
    // The weak primary is the one of the last slot and the sound one that of slot 0, so a check
    // that stops at the first primary it looks at (in slot order) would miss the weak one.
    const [weak, sound] = [await cluster.primaryOf(16383), await cluster.primaryOf(0)];
    const [onWeak, onSound] = [await sessionIdOn(cluster, weak!, "weak"), await sessionIdOn(cluster, sound!, "sound")];
    expect(await status()).toBe(Status.SERVING);
    await setFsync(weak!, "everysec");
    try {
      await waitFor(async () => (await status()) === Status.NOT_SERVING, 20_000, "NOT_SERVING once the weakened primary is checked");
      await expectCode(sessions.save({ sessionId: onWeak, snapshot: snap }), Code.Unavailable, "appendfsync");
      expect((await sessions.list({})).sessions.map((s) => s.sessionId)).not.toContain(onWeak);
      await sessions.save({ sessionId: onSound, snapshot: snap });
    } finally {
      await setFsync(weak!, "always");
    }
    await waitFor(async () => (await status()) === Status.SERVING, 20_000, "SERVING once the primary is durable again");
    await sessions.save({ sessionId: onWeak, snapshot: snap });
  });

  test("health is NOT_SERVING while a slot has no reachable primary, and SERVING again once a replica took over", async () => {
    const [victim] = await cluster.primaries();
    const id = await sessionIdOn(cluster, victim!, "failover");
    await victim!.kill();
    try {
      await waitFor(async () => (await status()) === Status.NOT_SERVING, 10_000, "NOT_SERVING with a primary gone");
      await waitFor(async () => (await status()) === Status.SERVING, cluster.nodeTimeoutMs + 20_000, "SERVING after the failover");
      await sessions.save({ sessionId: id, snapshot: snap });
    } finally {
      await victim!.restart();
      await cluster.waitHealthy();
    }
  });

  test("a replica promoted by a failover is checked before it takes writes: one without appendfsync always keeps its slots refusing them", async () => {
    const [primary] = await cluster.primaries();
    const [replica] = await cluster.replicasOf(primary!);
    const id = await sessionIdOn(cluster, primary!, "promoted");
    // Durability checks that found a problem: the weak replica is the only node with one from here.
    const problems = () => metricValue(server.metricsAddress!, "mecatl_drivers_redis_durability_checks_total", { outcome: "problem" });
    const problemsBefore = await problems();
    await setFsync(replica!, "everysec");
    try {
      // The replica's watch has seen it (a change is found within a check interval, as on a primary:
      // a failover sooner than that would promote it on the strength of its last check).
      await waitFor(async () => (await problems()) > problemsBefore, 20_000, "a check of the replica finding appendfsync everysec");
      // A weak replica is no problem while it is a replica.
      expect(await status()).toBe(Status.SERVING);
      await primary!.kill();
      await waitFor(async () => (await cluster.primaries()).some((n) => n.port === replica!.port), cluster.nodeTimeoutMs + 20_000, "the replica's promotion");
      // Until the server has seen the promotion the slot has no primary; then the weak one is found.
      // Either way every write is refused; none may succeed.
      await waitFor(
        async () => (await expectCode(sessions.save({ sessionId: id, snapshot: snap }), Code.Unavailable)).rawMessage.includes("appendfsync"),
        20_000,
        "writes refused for the promoted primary's weak persistence",
      );
      expect(await status()).toBe(Status.NOT_SERVING);
    } finally {
      await setFsync(replica!, "always");
      await primary!.restart();
      await cluster.waitHealthy();
    }
    await waitFor(async () => (await status()) === Status.SERVING, 20_000, "SERVING once the promoted primary is durable");
    await sessions.save({ sessionId: id, snapshot: snap });
  });
});
