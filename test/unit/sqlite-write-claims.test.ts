import { describe, expect, test } from "vitest";
import { WRITE_SLOTS, WriteClaims } from "../../services/storage/sqlite-write-claims.js";

/** The table deciding who owns a queued SQLite write at its deadline (services/storage/sqlite-write-claims.ts). */
describe("WriteClaims", () => {
  test("a write cancelled before it started never starts; one started cannot be cancelled", () => {
    const main = new WriteClaims();
    const worker = new WriteClaims(main.memory);
    const a = main.queue(1);
    expect(main.cancel(1, a)).toBe("cancelled");
    expect(worker.start(1, a)).toBe(false);
    worker.release(1, a);
    const b = main.queue(2);
    expect(worker.start(2, b)).toBe(true);
    expect(main.cancel(2, b)).toBe("started");
    worker.release(2, b);
  });

  test("a write the worker has answered and released is 'answered': its reply, on its way, decides", () => {
    const main = new WriteClaims();
    const worker = new WriteClaims(main.memory);
    // Dropped unstarted by the worker (its own deadline check) and released before the main thread's timer ran.
    const a = main.queue(3);
    worker.release(3, a);
    expect(main.cancel(3, a)).toBe("answered");
    // Run and released.
    const b = main.queue(4);
    expect(worker.start(4, b)).toBe(true);
    worker.release(4, b);
    expect(main.cancel(4, b)).toBe("answered");
  });

  test("a slot is reused only once released, and a decision about an older write does not touch the newer one", () => {
    const claims = new WriteClaims();
    const first = claims.queue(5);
    expect(claims.queue(5 + WRITE_SLOTS)).toBe(-1);
    claims.release(5, first);
    const second = claims.queue(5 + WRITE_SLOTS);
    expect(second).toBe(first);
    expect(claims.cancel(5, first)).toBe("answered");
    claims.release(5, first);
    expect(claims.start(5 + WRITE_SLOTS, second)).toBe(true);
    // An untracked write always starts and cannot be cancelled: it may have started.
    expect(claims.start(9, -1)).toBe(true);
    expect(claims.cancel(9, -1)).toBe("started");
  });
});
