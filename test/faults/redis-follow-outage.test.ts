import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Code, ConnectError } from "@connectrpc/connect";
import { appendsSucceedAgain, startRedisBehindProxy, type RedisBehindProxy } from "../helpers/redis-behind-proxy.js";
import { appendSeqs, openFollow, seqsOf } from "../helpers/event-log.js";

/** `--store-timeout` of the server under test, and the slack allowed on top of it (a bound, not a benchmark). */
const TIMEOUT_MS = 1000;
const SLACK_MS = 2000;

/**
 * Follow streams on Redis through an outage (issue 9: never a hang, never
 * INTERNAL; wire-contract.md section 3.6). A follow's wake-ups come from a
 * SUBSCRIBE on the subscriber connection; one sent while Redis is silent
 * or down was left unanswered for good (the follow hung holding its
 * --max-followers slot, and followers that came later for the same session
 * waited on it too) or failed INTERNAL with ioredis's "max retries per
 * request". Both now end UNAVAILABLE within --store-timeout, and the slot is
 * free again.
 */
describe("Redis follow streams through an outage", () => {
  let env: RedisBehindProxy;
  beforeAll(async () => {
    // Two follower slots, both used after each fault: a follow that kept its slot would refuse one (follow_capacity).
    env = await startRedisBehindProxy(["--store-timeout", `${TIMEOUT_MS}ms`, "--max-followers", "2"]);
  });
  afterAll(async () => {
    await env?.stop();
  });

  /** The first record (or error) of a follow of `sessionId` after `cursor`, failing the test if neither comes within the bound. */
  const firstOfFollow = async (sessionId: string, cursor: string): Promise<{ seq?: unknown; code?: Code; message?: string; ms: number }> => {
    const started = performance.now();
    const stream = openFollow(env.clients.events, { sessionId, cursor });
    const bound = new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`no record and no error within ${TIMEOUT_MS + SLACK_MS} ms: the follow hangs`)), TIMEOUT_MS + SLACK_MS));
    try {
      const r = await Promise.race([stream.next(), bound]);
      return { seq: seqsOf([r])[0], ms: performance.now() - started };
    } catch (err) {
      if (!(err instanceof ConnectError)) throw err;
      return { code: err.code, message: err.rawMessage, ms: performance.now() - started };
    } finally {
      await stream.cancel();
    }
  };
  /** After the fault: appends succeed again, and two follows (every slot) are woken by the next append. */
  const followWorks = async (sessionId: string, cursor: string) => {
    await appendsSucceedAgain(env, "fo-probe");
    const streams = [openFollow(env.clients.events, { sessionId, cursor }), openFollow(env.clients.events, { sessionId, cursor })];
    try {
      await new Promise((r) => setTimeout(r, 300));
      await appendSeqs(env.clients.events, sessionId, [2]);
      for (const stream of streams) expect(seqsOf([await stream.next()])[0]).toBe(2);
    } finally {
      for (const stream of streams) await stream.cancel();
    }
  };

  // First: the subscriber connection is opened by this follow, while Redis is down.
  test("a follow started while Redis is down is UNAVAILABLE in time, never INTERNAL, and frees its slot", async () => {
    const [cursor] = await appendSeqs(env.clients.events, "fo-down", [1]);
    await env.redis.kill();
    try {
      const first = await firstOfFollow("fo-down", cursor!);
      expect(first).toMatchObject({ code: Code.Unavailable });
      expect(first.ms).toBeLessThan(TIMEOUT_MS + SLACK_MS);
    } finally {
      await env.redis.restart();
    }
    await followWorks("fo-down", cursor!);
  });

  test("a follow started while Redis is silent is UNAVAILABLE in time naming the subscription, frees its slot, and the next follow of the session is woken", async () => {
    const [cursor] = await appendSeqs(env.clients.events, "fo-silent", [1]);
    env.proxy.setMode("blackhole");
    try {
      const first = await firstOfFollow("fo-silent", cursor!);
      expect(first).toMatchObject({ code: Code.Unavailable });
      expect(first.message).toMatch(/Redis did not confirm the follow's subscription within 1000 ms/);
      expect(first.ms).toBeLessThan(TIMEOUT_MS + SLACK_MS);
    } finally {
      env.proxy.setMode("pass");
      env.proxy.resetAll();
    }
    // The same session again: its unanswered SUBSCRIBE was dropped with its last follower, so this one sends its own.
    await followWorks("fo-silent", cursor!);
  });

  test("a follow that joins an unanswered subscription fails with it, not a whole --store-timeout later", async () => {
    // Before, each follower waited a timeout of its own on the shared SUBSCRIBE: a harness that
    // re-followed within the timeout kept the dead subscription alive, and no follow of the
    // session got through until they stopped overlapping.
    const [cursor] = await appendSeqs(env.clients.events, "fo-join", [1]);
    env.proxy.setMode("blackhole");
    try {
      const first = firstOfFollow("fo-join", cursor!).then((r) => ({ ...r, endedAt: performance.now() }));
      await new Promise((r) => setTimeout(r, 800));
      const joined = await firstOfFollow("fo-join", cursor!).then((r) => ({ ...r, endedAt: performance.now() }));
      const [a, b] = [await first, joined];
      expect([a.code, b.code]).toEqual([Code.Unavailable, Code.Unavailable]);
      // The same SUBSCRIBE's limit ends both, in one turn of the server's event loop (800 ms apart before).
      expect(Math.abs(b.endedAt - a.endedAt)).toBeLessThan(400);
    } finally {
      env.proxy.setMode("pass");
      env.proxy.resetAll();
    }
    await followWorks("fo-join", cursor!);
  });
});
