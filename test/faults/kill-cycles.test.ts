import { afterAll, describe, expect, test } from "vitest";
import { sharedBackends, type TestBackend } from "../helpers/backends.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { freeLowPort, waitFor } from "../helpers/wait.js";
import type { SpawnedRedis } from "../helpers/redis-server.js";
import type { DriverClients } from "../../clients/factory.js";
import { summarize } from "../../clients/workload/report.js";
import { startOutageWorkload } from "../helpers/outage-workload.js";

const CYCLES = 20;
/** Appends acknowledged between two kills: the kill lands wherever the writers are. */
const APPENDS_PER_CYCLE = 8;
/** Milliseconds the cycles may take before the test fails with their timings (about 15 s unloaded). */
const BUDGET_MS = 150_000;

/**
 * `kill -9` under the harness workload (issue 9 deliverable 5): the server
 * is killed and restarted 20 times (on Redis, every other cycle kills the
 * redis-server instead), with the workload's processes, watchers and
 * scheduler running and expecting outages (`outages`: a call that fails with
 * UNAVAILABLE is retried, a write whose answer was lost is looked up before
 * it is sent again). Then the workload's own checks decide: every
 * acknowledged snapshot, event, claim and fire is there, nothing was applied
 * twice (no event stored twice, no claim counted twice), and leases never
 * overlapped.
 */
describe.each(sharedBackends())("kill -9 cycles under the workload on $name", (backend: TestBackend) => {
  let server: ServerProcess | undefined;
  let clients: DriverClients | undefined;
  afterAll(async () => {
    clients?.close();
    await server?.stop();
    await backend.teardown();
  });

  test(`${CYCLES} kills and restarts: zero acknowledged writes lost, zero applied twice`, async (ctx) => {
    const clockAtStart = wallClockOffsetMs();
    const { store, redis } = await backend.setup();
    const listen = `127.0.0.1:${await freeLowPort(27000, 29999)}`;
    const serve = () => startServer(["--store", store, "--lease-ttl", "3s", "--store-timeout", "1s"], { listen });
    server = await serve();
    // Count acknowledged appends, to kill only once the workload is making progress again.
    const workload = await startOutageWorkload(listen, {
      runId: `kill-${backend.name}`,
      processes: 2,
      sessions: 2,
      watchers: 2,
      schedules: 2,
      maxSnapshotBytes: 96 * 1024,
      drainMs: 20_000,
    });
    clients = workload.clients;
    const acked = () => workload.acked();
    const kills = { server: 0, redis: 0 };
    /** Milliseconds each cycle took, reported when the run is too slow, to show where it stalled. */
    const cycleMs: number[] = [];
    const began = performance.now();
    try {
      for (let cycle = 0; cycle < CYCLES; cycle++) {
        const cycleBegan = performance.now();
        if (cycleBegan - began > BUDGET_MS) throw new Error(`only ${cycle} of ${CYCLES} cycles in ${BUDGET_MS} ms; cycle times (ms): ${cycleMs.join(", ")}; server log tail:\n${server.stderr.slice(-10).join("\n")}`);
        const target = acked() + APPENDS_PER_CYCLE;
        await waitFor(() => acked() >= target, 30_000, `${APPENDS_PER_CYCLE} acknowledged appends in cycle ${cycle} (cycle times so far, ms: ${cycleMs.join(", ")})`);
        if (redis !== undefined && cycle % 2 === 1) {
          await killRedis(redis);
          kills.redis++;
        } else {
          await server.kill();
          server = await serve();
          kills.server++;
        }
        cycleMs.push(Math.round(performance.now() - cycleBegan));
      }
      const target = acked() + APPENDS_PER_CYCLE;
      await waitFor(() => acked() >= target, 30_000, "appends after the last restart");
    } finally {
      void workload.finish();
    }
    const summary = summarize(await workload.finish());
    // Leases and claims are wall-clock rules (wire-contract.md 4.3), and the workload times what it sees from its own
    // start: a step of the host's wall clock during the run (a CI run saw leases granted 1-8 s "early" and a renewal
    // find its lease expired, with the clock being corrected) voids the run's lease and fire checks, not the driver.
    const stepped = Math.abs(wallClockOffsetMs() - clockAtStart);
    if (stepped > CLOCK_STEP_MS && summary.violations.length > 0) ctx.skip(`the wall clock stepped by ${stepped.toFixed(0)} ms during the run; its checks cannot judge the driver`);
    expect(summary.violations).toEqual([]);
    expect(summary.ok).toBe(true);
    expect(kills.server + kills.redis).toBe(CYCLES);
    expect(summary.counts.outageRetries).toBeGreaterThan(0);
    expect(summary.counts.claims).toBeGreaterThan(0);
    expect(summary.checks.filter((c) => !c.checked)).toEqual([]);
  }, BUDGET_MS + 90_000);
});

/** Milliseconds the wall clock may move against the monotonic clock during a run before its lease checks are void. */
const CLOCK_STEP_MS = 200;

/** The wall clock minus this process's monotonic clock, in milliseconds: constant unless the wall clock is stepped (or slewed). */
function wallClockOffsetMs(): number {
  return Date.now() - (performance.timeOrigin + performance.now());
}

async function killRedis(redis: SpawnedRedis): Promise<void> {
  await redis.kill();
  await redis.restart();
}
