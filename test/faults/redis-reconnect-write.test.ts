import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Code } from "@connectrpc/connect";
import type { Redis } from "ioredis";
import { startRedisBehindProxy, type RedisBehindProxy } from "../helpers/redis-behind-proxy.js";
import { ev, readAfterAll } from "../helpers/event-log.js";
import { timed } from "../helpers/observe.js";

/** `--store-timeout`: long enough for the slow reconnect below to finish within it. */
const STORE_TIMEOUT_MS = 5000;
/** Each chunk through the proxy is held this long once the connection comes back, so a round trip on it takes twice that. */
const SLOW_MS = 500;

/**
 * A write in flight when the Redis connection drops (issue 9; README Redis,
 * exactly-once writes, and Failures). ioredis must not send it again by
 * itself on reconnect (its default, `autoResendUnfulfilledCommands`, would,
 * ahead of any check), and the server's own retry must wait for the
 * durability check on the new connection. Here Redis stops being durable
 * while the write is lost in a black hole; the connection is then reset and
 * comes back slow, so that check takes a while to answer. The write must be
 * refused, never applied to the non-durable Redis and acknowledged.
 */
describe("a write in flight when the Redis connection drops", () => {
  let env: RedisBehindProxy;
  let admin: Redis;
  beforeAll(async () => {
    env = await startRedisBehindProxy(["--store-timeout", `${STORE_TIMEOUT_MS}ms`]);
    admin = env.redis.client();
  });
  afterAll(async () => {
    admin?.disconnect();
    await env?.stop();
  });

  test("is neither re-sent by the client nor retried before the new connection's durability check: Redis turned non-durable meanwhile, so it is refused and not stored", async () => {
    const { events } = env.clients;
    // The Append script is cached and the connection verified.
    await events.append({ sessionId: "rw-warm", event: ev({ n: 0 }) });

    env.proxy.setMode("blackhole");
    const swallowed = env.proxy.nextSwallowed((chunk) => chunk.includes("}:rw-lost:"));
    const write = timed(events.append({ sessionId: "rw-lost", event: ev({ n: 1 }) }));
    await swallowed;
    await admin.config("SET", "appendfsync", "everysec");
    env.proxy.delayMs = SLOW_MS;
    env.proxy.setMode("delay");
    env.proxy.resetAll();

    const outcome = await write;
    try {
      expect(outcome.error?.code, outcome.error?.message ?? "the write was acknowledged").toBe(Code.Unavailable);
      // The check found the problem, or (on a starved machine) did not answer within its limit.
      expect(outcome.error?.rawMessage).toMatch(/appendfsync is "everysec"|durability is not yet verified again/);
      // The first attempt reached the black hole, so the answer may not claim that nothing was written.
      expect(outcome.error?.rawMessage).toContain("the write may or may not have been applied (outcome unknown)");
      expect(outcome.error?.rawMessage).not.toContain("nothing was written");
    } finally {
      await admin.config("SET", "appendfsync", "always");
      env.proxy.setMode("pass");
    }
    // Reads go on whatever the durability: the write left nothing behind.
    expect(await readAfterAll(events, { sessionId: "rw-lost" })).toEqual([]);
  });
});
