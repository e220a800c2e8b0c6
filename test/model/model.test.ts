import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { MODEL_BACKENDS, runModel, startModelTarget, type ModelTarget } from "./model-run.js";

/**
 * Model-based tests (issue 9 deliverable 6), short run: random sequences of
 * session, event, lease and schedule operations from up to three concurrent
 * clients against each real backend, answers checked against the contract
 * model; on Redis the fault proxy loses replies and resets connections
 * between steps. `npm run model -- --runs N` is the long run.
 */
describe.each(MODEL_BACKENDS)("the contract model on %s", (backend) => {
  let target: ModelTarget;
  beforeAll(async () => {
    target = await startModelTarget(backend);
  });
  afterAll(async () => {
    await target?.stop();
  });

  test("random concurrent sequences answer as the model says", async () => {
    const stats = await runModel(target, { runs: 12, maxCommands: 25 });
    expect(stats.runs).toBe(12);
    expect(stats.operations).toBeGreaterThan(100);
    expect(stats.concurrentBatches).toBeGreaterThan(0);
    if (backend === "redis") expect(stats.lostReplies).toBeGreaterThan(0);
  });
});
