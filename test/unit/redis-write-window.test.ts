import { describe, expect, test } from "vitest";
import { RedisWindowTimeout, RedisWriteWindow } from "../../services/storage/redis-write-window.js";
import { GROUP_COMMIT_MIN } from "../../services/storage/group-commit-limit.js";
import { classifyRedisError } from "../../services/storage/redis-errors.js";

/** The Redis write window's bookkeeping (issue 11, services/storage/redis-write-window.ts), without Redis. */
describe("RedisWriteWindow", () => {
  test("admits up to its limit at once, then the waiting writes in arrival order as places are given back", async () => {
    const window = new RedisWriteWindow();
    for (let i = 0; i < GROUP_COMMIT_MIN; i++) expect(window.enter(1000)).toBeUndefined();
    const order: number[] = [];
    const waiting = [0, 1, 2].map((i) => window.enter(1000)!.then(() => order.push(i)));
    await new Promise((r) => setImmediate(r));
    expect(order).toEqual([]);
    window.leave();
    await waiting[0];
    expect(order).toEqual([0]);
    window.leave();
    window.leave();
    await Promise.all(waiting);
    expect(order).toEqual([0, 1, 2]);
  });

  test("a write that waits longer than its time is refused unsent, and its place is not taken", async () => {
    const window = new RedisWriteWindow();
    for (let i = 0; i < GROUP_COMMIT_MIN; i++) window.enter(1000);
    const late = window.enter(20)!;
    await expect(late).rejects.toBeInstanceOf(RedisWindowTimeout);
    expect(classifyRedisError(await late.catch((e: unknown) => e))).toEqual({ kind: "retry", sent: false, cause: "earlier writes to Redis were not answered" });
    // The timed-out write left the queue: the next place given back goes to a new write at once.
    window.leave();
    expect(window.enter(1000)).toBeUndefined();
  });

  test("the limit doubles after a whole group was answered while a group's worth waited", async () => {
    const window = new RedisWriteWindow();
    for (let i = 0; i < GROUP_COMMIT_MIN; i++) window.enter(1000);
    const waiting = Array.from({ length: 3 * GROUP_COMMIT_MIN }, () => window.enter(1000)!);
    // Answers of the first group: the limit is judged when the 16th comes back, with 32 still waiting.
    for (let i = 0; i < GROUP_COMMIT_MIN; i++) window.leave();
    let admitted = 0;
    for (const w of waiting) void w.then(() => admitted++);
    await new Promise((r) => setImmediate(r));
    // 16 places given back plus 16 more from the doubled limit.
    expect(admitted).toBe(2 * GROUP_COMMIT_MIN);
  });
});
