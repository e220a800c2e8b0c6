/**
 * Swapping backends under the harness workload (issue 14): the workload
 * runs against a server on one store; its writers are stopped by stopping
 * that server (the workload expects outages and retries), the store is
 * copied with `mecatl-drivers copy`, and a server on the target takes the
 * same address. The workload then goes on and its own checks decide:
 * every acknowledged snapshot and event is there, followers resume from the
 * cursors the old store issued (an expired cursor is a violation), no claim
 * or fire is lost or doubled, lease tokens keep rising. A lease held across
 * the swap renews with its token, and a takeover gets a token above the old
 * store's high-water mark.
 */
import { afterAll, describe, expect, test } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawnRedis, type SpawnedRedis } from "../helpers/redis-server.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { freeLowPort, waitFor } from "../helpers/wait.js";
import { runCli } from "../helpers/cli.js";
import type { DriverClients } from "../../clients/factory.js";
import { summarize } from "../../clients/workload/report.js";
import { startOutageWorkload } from "../helpers/outage-workload.js";

const dir = mkdtempSync(join(tmpdir(), "mecatl-swap-"));
let redis: SpawnedRedis | undefined;
afterAll(async () => {
  await redis?.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function redisUrl(db: number): Promise<string> {
  redis ??= await spawnRedis();
  return `${redis.url}/${db}`;
}

const SWAPS: Array<[string, () => Promise<string>, () => Promise<string>]> = [
  ["sqlite -> redis", async () => `sqlite:${join(dir, "a.sqlite")}`, () => redisUrl(1)],
  ["redis -> sqlite", () => redisUrl(2), async () => `sqlite:${join(dir, "b.sqlite")}`],
];

describe.each(SWAPS)("swap %s under the workload", (name, sourceUrl, targetUrl) => {
  let server: ServerProcess | undefined;
  let clients: DriverClients | undefined;
  afterAll(async () => {
    clients?.close();
    await server?.stop();
  });

  test("stop the writers, copy, serve the target: every invariant holds across the swap", async () => {
    const from = await sourceUrl();
    const to = await targetUrl();
    const listen = `127.0.0.1:${await freeLowPort(27000, 29999)}`;
    const serve = (store: string) => startServer(["--store", store, "--lease-ttl", "20s", "--store-timeout", "1s"], { listen });
    server = await serve(from);
    const workload = await startOutageWorkload(listen, {
      runId: `swap-${name.replace(/\W+/g, "-")}`,
      processes: 2,
      sessions: 2,
      watchers: 4,
      schedules: 2,
      maxSnapshotBytes: 96 * 1024,
      // Followers keep their streams open across the swap: they resume from the cursors the old store issued.
      drainMs: 20_000,
    });
    clients = workload.clients;
    const acked = () => workload.acked();
    const lease = clients.sessionLease!;
    try {
      await waitFor(() => acked() >= 40, 30_000, "40 acknowledged appends before the swap");
      const held = await lease.acquire("swap-held", "holder");
      for (const owner of ["a", "b"]) await lease.release(await lease.acquire("swap-free", owner));

      await server.stop();
      const copied = await runCli(["copy", "--from", from, "--to", to], { timeoutMs: 60_000 });
      expect(copied.code, `${copied.stdout}\n${copied.stderr}`).toBe(0);
      server = await serve(to);

      expect((await lease.renew(held)).token).toBe(held.token);
      expect((await lease.acquire("swap-free", "c")).token).toBe(3n);
      const target = acked() + 40;
      await waitFor(() => acked() >= target, 30_000, "40 acknowledged appends after the swap");
      // The schedules fire every 1 or 2 s: on a fast machine the appends above take less than that.
      const claims = workload.claimed() + 1;
      await waitFor(() => workload.claimed() >= claims, 30_000, "a schedule claimed after the swap");
    } finally {
      void workload.finish();
    }
    const summary = summarize(await workload.finish());
    expect(summary.violations).toEqual([]);
    expect(summary.ok).toBe(true);
    expect(summary.counts.outageRetries).toBeGreaterThan(0);
    // Followers' streams ended with the old server and resumed on the new one from their cursors.
    expect(summary.counts.watcherResumes).toBeGreaterThan(0);
    expect(summary.counts.claims).toBeGreaterThan(0);
    expect(summary.checks.filter((c) => !c.checked)).toEqual([]);
  }, 150_000);
});
