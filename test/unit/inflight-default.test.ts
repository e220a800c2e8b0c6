import { describe, expect, test } from "vitest";
import { totalmem } from "node:os";
import { availableMemoryBytes, defaultInflightBytesFor, MIN_DEFAULT_INFLIGHT_BYTES } from "../../services/server/inflight-default.js";
import { HELD_COPIES, InflightBudget } from "../../services/server/inflight-budget.js";
import { MAX_MESSAGE_BYTES } from "../../services/server/server.js";
import { GRPC_PREFIX_BYTES } from "../../services/server/grpc-request-watch.js";

const MiB = 1024 * 1024;

/**
 * The default --max-inflight-bytes (issue 10 deliverable 3): a quarter of the
 * memory the process may use, and never less than one maximum-size call as
 * the budget charges it (each message byte three times).
 */
describe("the default budget for bytes in flight", () => {
  test("is a quarter of the memory on a large host", () => {
    expect(defaultInflightBytesFor(4096 * MiB)).toBe(1024 * MiB);
    expect(defaultInflightBytesFor(1000 * MiB + 3)).toBe(Math.floor((1000 * MiB + 3) / 4));
  });

  test("on a small host is the floor, which admits the largest request, or the largest Load answer with its request, when nothing else is in flight", () => {
    for (const memory of [0, 256 * MiB, 512 * MiB, 780 * MiB]) {
      expect(defaultInflightBytesFor(memory), `${memory} bytes`).toBe(MIN_DEFAULT_INFLIGHT_BYTES);
      const save = new InflightBudget(defaultInflightBytesFor(memory), 0);
      expect(save.tryTake(MAX_MESSAGE_BYTES + GRPC_PREFIX_BYTES)).toBe(true);
      expect(save.tryTake(0)).toBe(true); // Save's empty answer
      const load = new InflightBudget(defaultInflightBytesFor(memory), 0);
      expect(load.tryTake(GRPC_PREFIX_BYTES + 16 * 1024 + 8)).toBe(true); // Load of the longest id
      expect(load.tryTake(64 * MiB)).toBe(true); // the largest snapshot's answer
    }
    expect(MIN_DEFAULT_INFLIGHT_BYTES).toBe(HELD_COPIES * (MAX_MESSAGE_BYTES + GRPC_PREFIX_BYTES));
  });

  test("reads the memory this process may use", () => {
    expect(availableMemoryBytes()).toBeGreaterThan(0);
    expect(availableMemoryBytes()).toBeLessThanOrEqual(totalmem());
  });
});
