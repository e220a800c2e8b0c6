import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { allBackends, type TestBackend } from "../helpers/backends.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { runCli } from "../helpers/cli.js";
import type { WorkloadSummary } from "../../clients/workload/report.js";

/*
 * A short run of the harness workload against each backend: two processes of
 * two sessions, four watchers reconnecting often, two schedules, small
 * snapshots so sessions rotate, and a process crash about every 2.5 s with a
 * 3 s lease TTL, so takeovers happen. The TTL leaves the renewer (every TTL/3)
 * two seconds of slack on a loaded CI machine: a renewal that comes too late is a
 * lost lease, which the run reports. Its own invariant checks must all pass.
 */
describe.each(allBackends())("mecatl-drivers workload on $name", (backend: TestBackend) => {
  let server: ServerProcess;

  beforeAll(async () => {
    const { store } = await backend.setup();
    server = await startServer(["--store", store, "--lease-ttl", "3s"]);
  });
  afterAll(async () => {
    await server?.stop();
    await backend.teardown();
  });

  test("an 8 s run with crashes and takeovers keeps every invariant and exits 0", async () => {
    const urls = ["session-store", "event-log", "session-lease", "schedule-store"].flatMap((s) => [`--${s}-url`, server.address]);
    const knobs = ["--duration", "8s", "--processes", "2", "--sessions", "2", "--watchers", "4", "--schedules", "2", "--max-snapshot", "256KiB", "--media-every", "2"];
    const faults = ["--crash-every", "2500ms", "--reconnect-every", "700ms", "--tick", "200ms", "--seed", "7"];
    const r = await runCli(["workload", ...urls, ...knobs, ...faults, "--json", "--quiet"], { timeoutMs: 90_000 });
    const summary = JSON.parse(r.stdout) as WorkloadSummary;
    expect(summary.violations, r.stderr).toEqual([]);
    expect(r.code).toBe(0);
    expect(summary.ok).toBe(true);
    expect(summary.checks.every((c) => c.checked && c.violations === 0)).toBe(true);
    const calls = new Map(summary.rpcs.map((x) => [x.rpc, x.calls]));
    expect(calls.get("SessionStoreService/Save")).toBeGreaterThan(0);
    expect(calls.get("EventLogService/Append")).toBeGreaterThan(0);
    expect(calls.get("follow delivery (append sent to record received)")).toBeGreaterThan(0);
    expect(calls.get("SessionLeaseService/Renew")).toBeGreaterThan(0);
    expect(summary.counts.sessions).toBeGreaterThan(4);
    expect(summary.counts.claims).toBeGreaterThan(0);
    expect(summary.counts.crashes).toBeGreaterThan(0);
    expect(summary.counts.watcherReconnects).toBeGreaterThan(0);
  });
});
