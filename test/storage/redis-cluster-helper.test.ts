import { spawn } from "node:child_process";
import { rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { connect } from "node:net";
import { describe, expect, test } from "vitest";
import { fileCluster } from "../helpers/backends.js";
import { PROJECT_ROOT } from "../helpers/server.js";
import { waitFor } from "../helpers/wait.js";

/** CRC16 slot of a key with hash tag `{a}` (every key here uses it). */
const SLOT_OF_A = 15495;

function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, "127.0.0.1");
    s.once("connect", () => (s.destroy(), resolve(true)));
    s.once("error", () => resolve(false));
  });
}

describe("the Redis Cluster test helper", () => {
  test("starts 3 primaries with one replica each, every node appendonly with appendfsync always", async () => {
    const cluster = await fileCluster();
    expect(cluster.nodes).toHaveLength(6);
    expect(await cluster.primaries()).toHaveLength(3);
    for (const n of cluster.nodes) {
      const c = n.client();
      const [aof, fsync, role] = await Promise.all([c.config("GET", "appendonly"), c.config("GET", "appendfsync"), c.role()]);
      c.disconnect();
      expect([(aof as string[])[1], (fsync as string[])[1]]).toEqual(["yes", "always"]);
      if (role[0] === "master") expect((role[2] as unknown[]).length).toBe(1);
    }
    expect(cluster.url).toMatch(/^redis\+cluster:\/\/127\.0\.0\.1:\d+(,127\.0\.0\.1:\d+){2}$/);
  });

  test("flush empties every primary", async () => {
    const cluster = await fileCluster();
    const c = cluster.client();
    await Promise.all(["{a}x", "{b}x", "{c}x", "{d}x"].map((k) => c.set(k, "1")));
    await cluster.flush();
    expect(await Promise.all(["{a}x", "{b}x", "{c}x", "{d}x"].map((k) => c.exists(k)))).toEqual([0, 0, 0, 0]);
    c.disconnect();
  });

  test("a killed primary's replica takes over within the node timeout plus a few seconds; the restarted node rejoins as a replica", async () => {
    const cluster = await fileCluster();
    const c = cluster.client();
    await c.set("{a}kept", "v");
    await c.wait(1, 5000);
    const old = await cluster.primaryOf(SLOT_OF_A);
    const started = Date.now();
    await old.kill();
    await cluster.waitHealthy(cluster.nodeTimeoutMs + 15_000);
    const took = Date.now() - started;
    const promoted = await cluster.primaryOf(SLOT_OF_A);
    expect(promoted.port).not.toBe(old.port);
    expect(took).toBeLessThan(cluster.nodeTimeoutMs + 15_000);
    const direct = promoted.client();
    expect(await direct.get("{a}kept")).toBe("v");
    direct.disconnect();

    await old.restart();
    await cluster.waitHealthy();
    const r = old.client();
    expect((await r.role())[0]).toBe("slave");
    r.disconnect();
    c.disconnect();
  });

  test("a node outlives no test process: killing the process that started a cluster kills its nodes", async () => {
    const helper = join(PROJECT_ROOT, "dist/test/helpers/redis-cluster.js");
    const child = spawn(process.execPath, ["-e", `import(${JSON.stringify(helper)}).then((m) => m.spawnCluster({ primaries: 1, replicas: 0 })).then((c) => console.log(c.nodes[0].port, c.nodes[0].dir))`], { stdio: ["ignore", "pipe", "inherit"] });
    const [port, dir] = await new Promise<[number, string]>((resolve, reject) => {
      child.stdout!.setEncoding("utf8").once("data", (line: string) => {
        const [p, d] = line.trim().split(" ");
        resolve([Number(p), d!]);
      });
      child.once("exit", (code) => reject(new Error(`the child exited with ${code} before its cluster was up`)));
    });
    expect(await portOpen(port)).toBe(true);
    child.kill("SIGKILL");
    await waitFor(async () => !(await portOpen(port)), 10_000, "the orphaned node to be killed");
    rmSync(dirname(dir), { recursive: true, force: true });
  });
});
