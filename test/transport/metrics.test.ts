import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { request } from "node:https";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startServer, runServeExpectingFailure, type ServerProcess } from "../helpers/server.js";
import { allBackends } from "../helpers/backends.js";
import { makePki, type TestPki } from "../helpers/certs.js";
import { sampleValue, samples, scrape } from "../helpers/metrics.js";
import { waitFor } from "../helpers/wait.js";
import { openDriverClients, type DriverClients } from "../../clients/factory.js";
import { formatNanos, ZERO_TIME } from "../../clients/time.js";

const enc = (v: unknown) => new TextEncoder().encode(JSON.stringify(v));

describe("process and Node.js metrics", () => {
  let server: ServerProcess;
  beforeAll(async () => {
    server = await startServer(["session-store", "--store", "sqlite::memory:", "--metrics-listen", "127.0.0.1:0"]);
  });
  afterAll(() => server?.stop());

  test("keep their standard names (no mecatl_drivers_ prefix), so stock dashboards work", async () => {
    const names = new Set(samples(await scrape(server.metricsAddress!)).map((s) => s.name));
    for (const n of ["process_cpu_seconds_total", "process_resident_memory_bytes", "process_start_time_seconds", "nodejs_heap_size_used_bytes", "nodejs_eventloop_lag_seconds", "nodejs_version_info"]) {
      expect(names, n).toContain(n);
    }
    expect([...names].filter((n) => n.startsWith("mecatl_drivers_process_") || n.startsWith("mecatl_drivers_nodejs_"))).toEqual([]);
  });

  test("a scrape with query parameters is served; other methods are 405 and other paths 404 (found by a fresh-eyes run)", async () => {
    const at = (path: string, method = "GET") => fetch(`http://${server.metricsAddress}${path}`, { method }).then((r) => r.status);
    expect(await at("/metrics?module=default")).toBe(200);
    expect(await at("/metrics", "HEAD")).toBe(200);
    expect(await at("/metrics", "POST")).toBe(405);
    expect(await at("/other")).toBe(404);
  });
});

describe("the metrics listener over HTTPS", () => {
  let pki: TestPki;
  let server: ServerProcess;
  beforeAll(async () => {
    pki = makePki();
    server = await startServer([
      "session-store",
      "--store",
      "sqlite::memory:",
      "--metrics-listen",
      "127.0.0.1:0",
      "--metrics-tls-cert",
      pki.serverCert,
      "--metrics-tls-key",
      pki.serverKey,
      "--metrics-tls-client-ca",
      pki.caCert,
    ]);
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(pki.dir, { recursive: true, force: true });
  });

  const get = (client: { cert?: Buffer; key?: Buffer }) =>
    new Promise<{ status: number; body: string }>((resolve, reject) => {
      const [host, port] = server.metricsAddress!.split(":");
      const req = request({ host, port: Number(port), path: "/metrics", ca: pki.read(pki.caCert), servername: "localhost", ...client }, (res) => {
        let body = "";
        res.setEncoding("utf8").on("data", (c: string) => (body += c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      });
      req.on("error", reject);
      req.end();
    });

  test("serves /metrics to a scraper with a client certificate, and to nobody else", async () => {
    const ok = await get({ cert: pki.read(pki.clientCert), key: pki.read(pki.clientKey) });
    expect(ok.status).toBe(200);
    expect(ok.body).toContain("mecatl_drivers_backend_up");
    await expect(get({})).rejects.toThrow();
    await expect(fetch(`http://${server.metricsAddress}/metrics`)).rejects.toThrow();
  });

  test("a metrics certificate without --metrics-listen, or without its key, is refused at start", async () => {
    const noListener = await runServeExpectingFailure(["--listen", "127.0.0.1:0", "--store", "sqlite::memory:", "--metrics-tls-cert", pki.serverCert, "--metrics-tls-key", pki.serverKey]);
    expect(noListener.code).toBe(2);
    expect(noListener.stderr).toContain("--metrics-tls-cert needs --metrics-listen");
    const noKey = await runServeExpectingFailure(["--listen", "127.0.0.1:0", "--store", "sqlite::memory:", "--metrics-listen", "127.0.0.1:0", "--metrics-tls-cert", pki.serverCert]);
    expect(noKey.code).toBe(2);
    expect(noKey.stderr).toContain("--metrics-tls-cert and --metrics-tls-key go together");
  });
});

describe("SQLite group commit", () => {
  let server: ServerProcess;
  let dir: string;
  let clients: DriverClients;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "mecatl-metrics-gc-"));
    server = await startServer(["--store", `sqlite:${join(dir, "s.sqlite")}`, "--metrics-listen", "127.0.0.1:0"]);
    clients = await openDriverClients({ sessionStoreUrl: server.address });
  });
  afterAll(async () => {
    clients?.close();
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test("every write is counted in exactly one group commit's batch size", async () => {
    await Promise.all(Array.from({ length: 64 }, (_, i) => clients.sessionStore!.save(`gc-${i}`, enc({ id: `gc-${i}` }))));
    const text = await scrape(server.metricsAddress!);
    expect(sampleValue(text, "mecatl_drivers_group_commit_writes_sum")).toBe(64);
    const commits = sampleValue(text, "mecatl_drivers_group_commit_writes_count")!;
    expect(commits).toBeGreaterThanOrEqual(1);
    expect(commits).toBeLessThanOrEqual(64);
  });
});

describe.each(allBackends())("store size per kind on $name", (backend) => {
  let server: ServerProcess;
  let clients: DriverClients;
  beforeAll(async () => {
    const { store, args } = await backend.setup();
    server = await startServer([...args, "--store", store, "--metrics-listen", "127.0.0.1:0", "--store-size-interval", "100ms"]);
    const url = server.address;
    clients = await openDriverClients({ sessionStoreUrl: url, eventLogUrl: url, sessionLeaseUrl: url, scheduleStoreUrl: url });
  });
  afterAll(async () => {
    clients?.close();
    await server?.stop();
    await backend.teardown();
  });

  const records = async () => {
    const text = await scrape(server.metricsAddress!);
    return Object.fromEntries(["sessions", "events", "leases", "schedules", "fires"].map((kind) => [kind, sampleValue(text, "mecatl_drivers_store_records", { kind })]));
  };
  const bytes = async (kind: string) => sampleValue(await scrape(server.metricsAddress!), "mecatl_drivers_store_bytes", { kind }) ?? 0;

  test("counts records per kind, measures their bytes, and follows deletions", async () => {
    const big = "x".repeat(40_000);
    for (const id of ["size-a", "size-b", "size-c"]) await clients.sessionStore!.save(id, enc({ id, big }));
    for (let i = 0; i < 5; i++) await clients.eventLog!.append("size-a", JSON.stringify({ type: "t", i }));
    await clients.eventLog!.appendGap("size-a", "lost");
    await clients.eventLog!.append("size-b", JSON.stringify({ type: "t" }));
    await clients.eventLog!.append("no-snapshot", JSON.stringify({ type: "t" }));
    await clients.sessionLease!.acquire("size-a", "owner-1");
    await clients.sessionLease!.acquire("size-b", "owner-1");
    const t0 = 1_800_000_000n * 1_000_000_000n;
    for (const name of ["size-s1", "size-s2"]) {
      await clients.scheduleStore!.saveSchedule({
        Spec: { Name: name, Prompt: "p", Trigger: { Cron: "0 3 * * *", OneShot: ZERO_TIME }, MaxFires: 0 },
        State: { NextFireAt: formatNanos(t0), LastFireAt: ZERO_TIME, FireCount: 0, Enabled: true },
      });
    }
    await clients.scheduleStore!.recordFire({ ID: "sched--size-1", ScheduleName: "size-s1", SessionID: "sched--size-1", FiredAt: formatNanos(t0), Stop: "end_turn", Err: "" });

    const expected = { sessions: 3, events: 8, leases: 2, schedules: 2, fires: 1 };
    await waitFor(async () => JSON.stringify(await records()) === JSON.stringify(expected), 10_000, `store records ${JSON.stringify(expected)}`);
    expect(await bytes("sessions")).toBeGreaterThanOrEqual(3 * 40_000);
    for (const kind of ["events", "leases", "schedules", "fires"]) expect(await bytes(kind), kind).toBeGreaterThan(0);

    // Deleting a session removes its snapshot and its event log (docs/DESIGN.md "Event log").
    await clients.sessionStore!.delete("size-a");
    await waitFor(async () => (await records()).sessions === 2 && (await records()).events === 2, 10_000, "the deletion to show in the store metrics");
    expect(await bytes("sessions")).toBeLessThan(3 * 40_000);
  });
});
