import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Code } from "@connectrpc/connect";
import type { Redis } from "ioredis";
import { startRedisBehindProxy, type RedisBehindProxy } from "../helpers/redis-behind-proxy.js";
import { expectCode } from "../helpers/errors.js";
import { ev, readAfterAll } from "../helpers/event-log.js";
import { readFileSync } from "node:fs";
import { waitFor } from "../helpers/wait.js";
import { healthThrough, metricSample, overallHealth, ServingStatus as Status } from "../helpers/observe.js";
import { EventLogService } from "../../gen/mecatl/driver/v1/event_log_pb.js";
import { fileCluster } from "../helpers/backends.js";
import { grpcClient } from "../helpers/clients.js";
import { sessionIdOn, type SpawnedCluster } from "../helpers/redis-cluster.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { REFUSAL_PROBE_INTERVAL_MS } from "../../services/storage/redis-write-refusal.js";

const TIMEOUT_MS = 1000;
/** Slack for process scheduling on a shared machine. */
const MARGIN_MS = 5000;
/** The health problem while Redis refuses writes for `cause` (redis-write-refusal.ts). */
const refusing = (cause: string) => `Redis refuses writes: ${cause}; writes fail until a probe write succeeds (one every ${REFUSAL_PROBE_INTERVAL_MS} ms)`;

/**
 * Redis answering writes with an error reply (issue 9 deliverable 2): a
 * condition of the infrastructure is never INTERNAL. OOM (maxmemory reached)
 * is RESOURCE_EXHAUSTED at once; READONLY (the server became a replica) is
 * retried until `--store-timeout`, then UNAVAILABLE; both say nothing was
 * written. MISCONF (Redis cannot persist) is UNAVAILABLE at once, saying so.
 * NOREPLICAS (`min-replicas-to-write` not met) is UNAVAILABLE at once. Before,
 * such replies were INTERNAL "internal storage error". Each of them also turns
 * health NOT_SERVING (Check and Watch, one log line naming the cause) until a
 * probe write succeeds once the condition is gone, within a probe interval;
 * before, health stayed SERVING throughout.
 */
describe("Redis refusing writes", () => {
  let env: RedisBehindProxy;
  let admin: Redis;
  let health: ReturnType<typeof healthThrough>;
  beforeAll(async () => {
    env = await startRedisBehindProxy(["--store-timeout", `${TIMEOUT_MS}ms`, "--metrics-listen", "127.0.0.1:0"]);
    admin = env.redis.client();
    health = healthThrough(env.server);
  });
  afterAll(async () => {
    await health?.stop();
    admin?.disconnect();
    await env?.stop();
  });

  const append = (sessionId: string) => env.clients.events.append({ sessionId, event: ev({ n: 1 }) });

  test("maxmemory reached: RESOURCE_EXHAUSTED saying so, nothing written, NOT_SERVING; SERVING and writes resume when memory is raised", async () => {
    const sample = 'mecatl_drivers_store_failures_total{kind="disk_full"}';
    const before = await metricSample(env.server.metricsAddress!, sample);
    await admin.config("SET", "maxmemory-policy", "noeviction");
    await admin.config("SET", "maxmemory", "1");
    try {
      const err = await expectCode(append("er-oom"), Code.ResourceExhausted);
      expect(err.rawMessage).toBe("Redis maxmemory reached; nothing was written");
      await health.notServing(refusing("maxmemory reached (OOM)"), MARGIN_MS);
      // A probe refused by Redis (its SET rejected) leaves health NOT_SERVING.
      const rejectedSets = async () => Number(/^cmdstat_set:.*\brejected_calls=(\d+)/m.exec(await admin.info("commandstats"))?.[1] ?? 0);
      const rejected = await rejectedSets();
      await waitFor(async () => (await rejectedSets()) > rejected, REFUSAL_PROBE_INTERVAL_MS + MARGIN_MS, "a probe write to be refused");
      expect(await overallHealth(env.server.address)).toBe(Status.NOT_SERVING);
      await expectCode(append("er-oom"), Code.ResourceExhausted);
      expect(await metricSample(env.server.metricsAddress!, sample)).toBe(before! + 2);
    } finally {
      await admin.config("SET", "maxmemory", "0");
    }
    await health.servingAgain(refusing("maxmemory reached (OOM)"), REFUSAL_PROBE_INTERVAL_MS + MARGIN_MS);
    await append("er-oom");
    expect(await readAfterAll(env.clients.events, { sessionId: "er-oom" })).toHaveLength(1);
  });

  test("unable to persist (MISCONF after a failed background save): UNAVAILABLE saying so, nothing written, NOT_SERVING; SERVING and writes resume once a save succeeds", async () => {
    // With a save point configured, a background save that fails makes Redis refuse every write
    // (stop-writes-on-bgsave-error, on by default). One key slowed to 1 s keeps the save running until it is killed.
    await admin.config("SET", "save", "3600 1");
    await admin.config("SET", "rdb-key-save-delay", "1000000");
    await admin.set("test:er-misconf-filler", "1");
    try {
      await admin.bgsave();
      const children = readFileSync(`/proc/${env.redis.pid}/task/${env.redis.pid}/children`, "utf8").trim();
      expect(children, "the background save's process").toMatch(/^\d+$/);
      process.kill(Number(children), "SIGKILL");
      await waitFor(async () => /^rdb_last_bgsave_status:err\r?$/m.test(await admin.info("persistence")), 10_000, "the killed save to count as failed");
      const err = await expectCode(append("er-misconf"), Code.Unavailable);
      expect(err.rawMessage).toBe("Redis cannot persist writes right now (MISCONF); nothing was written");
      await health.notServing(refusing("it cannot persist writes (MISCONF)"), MARGIN_MS);
    } finally {
      await admin.config("SET", "rdb-key-save-delay", "0");
      await admin.bgsave();
      await waitFor(async () => /^rdb_bgsave_in_progress:0\r?$/m.test(await admin.info("persistence")), 10_000, "the second save to finish");
      await admin.config("SET", "save", "");
      await admin.del("test:er-misconf-filler");
    }
    expect(await admin.info("persistence")).toMatch(/^rdb_last_bgsave_status:ok\r?$/m);
    await health.servingAgain(refusing("it cannot persist writes (MISCONF)"), REFUSAL_PROBE_INTERVAL_MS + MARGIN_MS);
    await append("er-misconf");
    expect(await readAfterAll(env.clients.events, { sessionId: "er-misconf" })).toHaveLength(1);
  });

  test("a read-only replica: UNAVAILABLE within the timeout saying so, nothing written, NOT_SERVING; SERVING and writes resume when it is primary again", async () => {
    // A primary that does not exist (port 1: nothing listens there, and no test process is ever
    // given it, unlike a port that was free a moment ago): the server stays a read-only replica.
    await admin.replicaof("127.0.0.1", "1");
    const started = performance.now();
    try {
      const err = await expectCode(append("er-readonly"), Code.Unavailable);
      expect(err.rawMessage).toMatch(/\(the Redis server is a read-only replica\); nothing was written$/);
      // Retried for most of the timeout (no retry starts with less than a quarter of it left), then given up.
      expect(performance.now() - started).toBeGreaterThanOrEqual(TIMEOUT_MS / 2);
      expect(performance.now() - started).toBeLessThan(TIMEOUT_MS + 2000);
      await health.notServing(refusing("it is a read-only replica (READONLY)"), MARGIN_MS);
    } finally {
      await admin.replicaof("NO", "ONE");
    }
    await health.servingAgain(refusing("it is a read-only replica (READONLY)"), REFUSAL_PROBE_INTERVAL_MS + MARGIN_MS);
    await append("er-readonly");
    expect(await readAfterAll(env.clients.events, { sessionId: "er-readonly" })).toHaveLength(1);
  });

  test("too few replicas (min-replicas-to-write): UNAVAILABLE saying so, nothing written, NOT_SERVING; SERVING and writes resume when the rule is lifted", async () => {
    await admin.config("SET", "min-replicas-to-write", "1");
    try {
      const err = await expectCode(append("er-noreplicas"), Code.Unavailable);
      expect(err.rawMessage).toBe("Redis has too few replicas to accept writes; nothing was written");
      await health.notServing(refusing("too few replicas in sync (NOREPLICAS)"), MARGIN_MS);
    } finally {
      await admin.config("SET", "min-replicas-to-write", "0");
    }
    await health.servingAgain(refusing("too few replicas in sync (NOREPLICAS)"), REFUSAL_PROBE_INTERVAL_MS + MARGIN_MS);
    await append("er-noreplicas");
    expect(await readAfterAll(env.clients.events, { sessionId: "er-noreplicas" })).toHaveLength(1);
  });
});

/**
 * One primary of a Redis Cluster refusing writes (OOM): its slots answer
 * RESOURCE_EXHAUSTED, health is NOT_SERVING naming that primary, the other
 * primaries' slots still take writes, and health is SERVING again within a
 * probe interval once it takes writes again (the probe goes to the slot
 * that refused).
 */
describe("a Redis Cluster primary refusing writes", () => {
  let cluster: SpawnedCluster;
  let server: ServerProcess;
  let health: ReturnType<typeof healthThrough>;
  beforeAll(async () => {
    cluster = await fileCluster();
    server = await startServer(["--store", cluster.url, "--store-timeout", `${TIMEOUT_MS}ms`]);
    health = healthThrough(server);
  });
  afterAll(async () => {
    await health?.stop();
    await server?.stop();
  });

  test("maxmemory reached on one primary: its writes RESOURCE_EXHAUSTED, NOT_SERVING naming it, the other primaries take writes; SERVING once memory is raised", async () => {
    const events = grpcClient(EventLogService, server.address);
    const append = (sessionId: string) => events.append({ sessionId, event: ev({ n: 1 }) });
    const [weak, sound] = [await cluster.primaryOf(16383), await cluster.primaryOf(0)];
    const [onWeak, onSound] = [await sessionIdOn(cluster, weak, "er-c-weak"), await sessionIdOn(cluster, sound, "er-c-sound")];
    const problem = `the Redis Cluster primary ${weak.address} refuses writes: maxmemory reached (OOM); writes fail until a probe write succeeds (one every ${REFUSAL_PROBE_INTERVAL_MS} ms)`;
    const admin = weak.client();
    try {
      await admin.config("SET", "maxmemory-policy", "noeviction");
      await admin.config("SET", "maxmemory", "1");
      try {
        const err = await expectCode(append(onWeak), Code.ResourceExhausted);
        expect(err.rawMessage).toBe("Redis maxmemory reached; nothing was written");
        await health.notServing(problem, MARGIN_MS);
        await append(onSound);
      } finally {
        await admin.config("SET", "maxmemory", "0");
      }
    } finally {
      admin.disconnect();
    }
    await health.servingAgain(problem, REFUSAL_PROBE_INTERVAL_MS + MARGIN_MS);
    await append(onWeak);
    expect(await readAfterAll(events, { sessionId: onWeak })).toHaveLength(1);
    expect(await readAfterAll(events, { sessionId: onSound })).toHaveLength(1);
  });
});
