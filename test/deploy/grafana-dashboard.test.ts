import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { samples, scrape } from "../helpers/metrics.js";
import { selectors, type Selector } from "../helpers/promql.js";
import { waitFor } from "../helpers/wait.js";
import { openDriverClients, type DriverClients } from "../../clients/factory.js";

const DASHBOARD = join(import.meta.dirname, "../../deploy/grafana/mecatl-drivers.json");

interface Panel {
  type: string;
  title: string;
  panels?: Panel[];
  targets?: Array<{ expr: string }>;
}

/** Every PromQL query of the dashboard: panel targets (rows included) and query variables. */
function queries(): Array<{ where: string; query: string }> {
  const dashboard = JSON.parse(readFileSync(DASHBOARD, "utf8")) as { panels: Panel[]; templating: { list: Array<{ name: string; type: string; query: unknown }> } };
  const out: Array<{ where: string; query: string }> = [];
  const walk = (panels: Panel[]) => {
    for (const p of panels) {
      for (const t of p.targets ?? []) out.push({ where: `panel "${p.title}"`, query: t.expr });
      walk(p.panels ?? []);
    }
  };
  walk(dashboard.panels);
  for (const v of dashboard.templating.list.filter((x) => x.type === "query")) {
    out.push({ where: `variable $${v.name}`, query: typeof v.query === "string" ? v.query : (v.query as { query: string }).query });
  }
  return out;
}

/** Labels Prometheus adds to every scraped series. */
const TARGET_LABELS = new Set(["job", "instance"]);

describe("the Grafana dashboard", () => {
  let server: ServerProcess;
  let dir: string;
  let clients: DriverClients;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "mecatl-dashboard-"));
    server = await startServer(["--store", `sqlite:${join(dir, "s.sqlite")}`, "--metrics-listen", "127.0.0.1:0", "--store-size-interval", "100ms"]);
    const url = server.address;
    clients = await openDriverClients({ sessionStoreUrl: url, eventLogUrl: url, sessionLeaseUrl: url });
  });
  afterAll(async () => {
    clients?.close();
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test("every query parses as PromQL and covers calls, errors, latency, group commit, followers, health and durability", () => {
    const used = new Set(queries().flatMap((q) => selectors(q.query).map((s) => s.metric)));
    for (const m of [
      "mecatl_drivers_rpcs_total",
      "mecatl_drivers_rpc_duration_seconds_bucket",
      "mecatl_drivers_group_commit_writes_bucket",
      "mecatl_drivers_followers",
      "mecatl_drivers_backend_up",
      "mecatl_drivers_durability",
      "mecatl_drivers_store_records",
      "mecatl_drivers_store_bytes",
    ]) {
      expect(used, m).toContain(m);
    }
  });

  test("every metric and label it queries exists on a running server's /metrics", async () => {
    await clients.sessionStore!.save("dash-1", new TextEncoder().encode(JSON.stringify({ id: "dash-1" })));
    await clients.sessionStore!.load("dash-missing").catch(() => undefined);
    await clients.eventLog!.append("dash-1", JSON.stringify({ type: "t" }));
    for await (const _ of clients.eventLog!.readAfter("dash-1")) void _;
    await clients.sessionLease!.acquire("dash-1", "dash-owner");
    await waitFor(async () => samples(await scrape(server.metricsAddress!)).some((s) => s.name === "mecatl_drivers_store_records" && s.labels.kind === "sessions" && s.value === 1), 10_000, "the store to be measured");

    const exposed = new Map<string, Set<string>>();
    for (const s of samples(await scrape(server.metricsAddress!))) {
      const labels = exposed.get(s.name) ?? new Set<string>();
      for (const l of Object.keys(s.labels)) labels.add(l);
      exposed.set(s.name, labels);
    }
    const missing: string[] = [];
    for (const { where, query } of queries()) {
      for (const sel of selectors(query) as Selector[]) {
        const labels = exposed.get(sel.metric);
        if (labels === undefined) missing.push(`${where}: metric ${sel.metric}`);
        else for (const l of sel.labels.filter((x) => !TARGET_LABELS.has(x) && !labels.has(x))) missing.push(`${where}: label ${l} of ${sel.metric}`);
      }
    }
    expect(missing).toEqual([]);
  });
});
