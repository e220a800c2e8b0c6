/** Operator commands against servers set up for one case each: a refusing server, a Redis store, a single-service token-protected server. */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { runCli } from "../helpers/cli.js";
import { allBackends } from "../helpers/backends.js";
import { openDriverClients } from "../../clients/factory.js";

const enc = (v: unknown) => new TextEncoder().encode(JSON.stringify(v));

describe("events append --file when the server refuses one event", () => {
  let server: ServerProcess;
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "mecatl-cli-partial-"));
    // A 512 KiB event counts three times against a 1 MiB budget: refused at once (RESOURCE_EXHAUSTED).
    server = await startServer(["event-log", "--store", "sqlite::memory:", "--max-inflight-bytes", "1MB"]);
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test("reports what was appended and what was not, and exits 1 (issue 14)", async () => {
    const file = join(dir, "events.jsonl");
    writeFileSync(file, ['{"n":1}', '{"n":2}', JSON.stringify({ n: 3, big: "z".repeat(512 * 1024) }), '{"n":4}', ""].join("\n"));
    const r = await runCli(["events", "append", "cli-partial", "--file", file, "--event-log-url", server.address]);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/^appended 2 event\(s\) to cli-partial; resume after them with --cursor \S+\n$/);
    expect(r.stderr).toContain(`--file ${file} line 3: `);
    expect(r.stderr).toContain("2 of 4 event(s) appended (the ones before it); the 1 after it were not sent");
    const clients = await openDriverClients({ eventLogUrl: server.address });
    try {
      const stored: number[] = [];
      for await (const rec of clients.eventLog!.readAfter("cli-partial")) if (rec.kind === "event") stored.push(JSON.parse(Buffer.from(rec.payload).toString("utf8")).n);
      expect(stored).toEqual([1, 2]);
    } finally {
      clients.close();
    }
  });
});

describe("stats on a Redis store", () => {
  const redis = allBackends().find((b) => b.name === "redis")!;
  let store: string;
  let server: ServerProcess;
  beforeAll(async () => {
    ({ store } = await redis.setup());
    server = await startServer(["session-store", "--store", store]);
  });
  afterAll(async () => {
    await server?.stop();
    await redis.teardown();
  });

  test("counts the sessions it holds", async () => {
    const clients = await openDriverClients({ sessionStoreUrl: server.address });
    try {
      for (const id of ["r-1", "r-2"]) await clients.sessionStore!.save(id, enc({ id }));
    } finally {
      clients.close();
    }
    const r = await runCli(["stats", "--store", store, "--json"]);
    expect(r.code).toBe(0);
    const sessions = (JSON.parse(r.stdout) as Array<{ kind: string; records?: number; bytes: number }>).find((k) => k.kind === "sessions")!;
    expect(sessions.records).toBe(2);
    expect(sessions.bytes).toBeGreaterThan(0);
  });
});

describe("operator commands against a single-service, token-protected server", () => {
  let server: ServerProcess;
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "mecatl-cli-token-"));
    writeFileSync(join(dir, "tokens"), "tok-cli\n");
    server = await startServer(["session-store", "--store", "sqlite::memory:", "--auth-token-file", join(dir, "tokens")]);
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test("the token comes from MECATL_DRIVER_AUTH_TOKEN or --driver-auth-token; without it the command fails", async () => {
    expect((await runCli(["sessions", "list", "--session-store-url", server.address], { env: { MECATL_DRIVER_AUTH_TOKEN: "tok-cli" } })).code).toBe(0);
    expect((await runCli(["sessions", "list", "--session-store-url", server.address, "--driver-auth-token", "tok-cli"])).code).toBe(0);
    const denied = await runCli(["sessions", "list", "--session-store-url", server.address]);
    expect(denied.code).toBe(1);
    expect(denied.stderr).toContain("Unauthenticated");
  });

  test("health exits 1 when a named service is not served there", async () => {
    const r = await runCli(["health", "--session-store-url", server.address, "--event-log-url", server.address]);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/EventLogService\s+SERVICE_UNKNOWN/);
  });
});
