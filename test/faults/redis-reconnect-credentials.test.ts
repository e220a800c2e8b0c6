/**
 * Redis refusing the credentials after the server connected (issue 13
 * follow-up): a password set on the server (`requirepass`) and every
 * connection killed. The reconnect's cause is logged once (not per retry),
 * health is NOT_SERVING meanwhile, and every call's UNAVAILABLE message
 * names it, instead of "not connected" alone. On a single Redis and on a
 * Redis Cluster (every node).
 */
import { afterAll, describe, expect, test } from "vitest";
import { Code } from "@connectrpc/connect";
import { Redis } from "ioredis";
import { Health, HealthCheckResponse_ServingStatus as Status } from "../../gen/grpc/health/v1/health_pb.js";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { fileCluster } from "../helpers/backends.js";
import { spawnRedis } from "../helpers/redis-server.js";
import { logEntries, startServer, type ServerProcess } from "../helpers/server.js";
import { grpcClient } from "../helpers/clients.js";
import { expectCode } from "../helpers/errors.js";
import { waitFor } from "../helpers/wait.js";

const snap = { format: "sessnap-json/1", payload: new TextEncoder().encode("{}") };
const NOT_SERVING = "store cannot take writes; health is NOT_SERVING";

/** Sets `requirepass` on the loopback node at `port` (reached with password `current`, when set) and closes every other normal client of it. */
async function setPassword(port: number, current: string | undefined, next: string): Promise<void> {
  const client = new Redis({ host: "127.0.0.1", port, password: current, maxRetriesPerRequest: 0 });
  try {
    await client.config("SET", "requirepass", next);
    await client.client("KILL", "TYPE", "normal");
  } finally {
    client.disconnect();
  }
}

/**
 * Sets a password behind the server's back, then checks what the server
 * says: NOT_SERVING, the cause in the log once and in a write's message;
 * then removes the password and waits for SERVING again.
 */
async function expectCredentialsNamed(server: ServerProcess, setAll: (current: string | undefined, next: string) => Promise<void>): Promise<void> {
  const health = grpcClient(Health, server.address);
  const sessions = grpcClient(SessionStoreService, server.address);
  await sessions.save({ sessionId: "before", snapshot: snap });
  const from = server.stderr.length;
  await setAll(undefined, "secret1");
  try {
    const named = () => logEntries(server, NOT_SERVING, from).filter((e) => String(e.entry.problem).includes("refused the credentials on reconnect"));
    await waitFor(() => named().length > 0, 15_000, "the credentials refusal in the health log");
    expect(String(named()[0]!.entry.problem)).toMatch(/NOAUTH|WRONGPASS/);
    expect((await health.check({ service: "" })).status).toBe(Status.NOT_SERVING);
    const err = await expectCode(sessions.save({ sessionId: "after", snapshot: snap }), Code.Unavailable, "refused the credentials on reconnect");
    expect(err.rawMessage).toMatch(/NOAUTH|WRONGPASS/);
    expect(err.rawMessage).toContain("nothing was written");
    // Reconnect attempts go on meanwhile: still one log line for the cause, not one per attempt.
    await new Promise((res) => setTimeout(res, 2000));
    expect(named()).toHaveLength(1);
  } finally {
    await setAll("secret1", "");
  }
  await waitFor(async () => (await health.check({ service: "" })).status === Status.SERVING, 20_000, "SERVING once the password is gone");
  await sessions.save({ sessionId: "after", snapshot: snap });
}

describe("Redis refusing the credentials on reconnect", () => {
  const cleanup: Array<() => Promise<void>> = [];
  afterAll(async () => {
    for (const step of cleanup.reverse()) await step();
  });
  const serve = async (store: string) => {
    const server = await startServer(["session-store", "--store", store, "--store-timeout", "2s"]);
    cleanup.push(() => server.stop());
    return server;
  };

  test("a single Redis: the cause is logged once, health is NOT_SERVING, calls name it", async () => {
    const redis = await spawnRedis();
    cleanup.push(() => redis.stop());
    await expectCredentialsNamed(await serve(redis.url), (current, next) => setPassword(redis.port, current, next));
  });

  test("a Redis Cluster, every node: the cause is logged once, health is NOT_SERVING, calls name it", async () => {
    const cluster = await fileCluster();
    await expectCredentialsNamed(await serve(cluster.url), async (current, next) => {
      await Promise.all(cluster.nodes.map((n) => setPassword(n.port, current, next)));
    });
    await cluster.waitHealthy();
  });
});
