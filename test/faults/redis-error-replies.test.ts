import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Code } from "@connectrpc/connect";
import type { Redis } from "ioredis";
import { startRedisBehindProxy, type RedisBehindProxy } from "../helpers/redis-behind-proxy.js";
import { expectCode } from "../helpers/errors.js";
import { ev, readAfterAll } from "../helpers/event-log.js";
import { freePort } from "../helpers/wait.js";

const TIMEOUT_MS = 1000;

/**
 * Redis answering writes with an error reply (issue 9 deliverable 2): a
 * condition of the infrastructure is never INTERNAL. OOM (maxmemory reached)
 * is RESOURCE_EXHAUSTED at once; READONLY (the server became a replica) is
 * retried until `--store-timeout`, then UNAVAILABLE; both say nothing was
 * written. Before, both were INTERNAL "internal storage error".
 */
describe("Redis refusing writes", () => {
  let env: RedisBehindProxy;
  let admin: Redis;
  beforeAll(async () => {
    env = await startRedisBehindProxy(["--store-timeout", `${TIMEOUT_MS}ms`]);
    admin = env.redis.client();
  });
  afterAll(async () => {
    admin?.disconnect();
    await env?.stop();
  });

  const append = (sessionId: string) => env.clients.events.append({ sessionId, event: ev({ n: 1 }) });

  test("maxmemory reached: RESOURCE_EXHAUSTED saying so, nothing written; writes resume when memory is raised", async () => {
    await admin.config("SET", "maxmemory-policy", "noeviction");
    await admin.config("SET", "maxmemory", "1");
    try {
      const err = await expectCode(append("er-oom"), Code.ResourceExhausted);
      expect(err.rawMessage).toBe("Redis maxmemory reached; nothing was written");
    } finally {
      await admin.config("SET", "maxmemory", "0");
    }
    await append("er-oom");
    expect(await readAfterAll(env.clients.events, { sessionId: "er-oom" })).toHaveLength(1);
  });

  test("a read-only replica: UNAVAILABLE within the timeout saying so, nothing written; writes resume when it is primary again", async () => {
    // A primary that does not exist: the server stays a read-only replica with its data.
    await admin.replicaof("127.0.0.1", String(await freePort()));
    const started = performance.now();
    try {
      const err = await expectCode(append("er-readonly"), Code.Unavailable);
      expect(err.rawMessage).toMatch(/\(the Redis server is a read-only replica\); nothing was written$/);
      // Retried for most of the timeout (no retry starts with less than a quarter of it left), then given up.
      expect(performance.now() - started).toBeGreaterThanOrEqual(TIMEOUT_MS / 2);
      expect(performance.now() - started).toBeLessThan(TIMEOUT_MS + 2000);
    } finally {
      await admin.replicaof("NO", "ONE");
    }
    await append("er-readonly");
    expect(await readAfterAll(env.clients.events, { sessionId: "er-readonly" })).toHaveLength(1);
  });
});
