import { afterEach, describe, expect, test } from "vitest";
import Database from "better-sqlite3";
import { Code, ConnectError } from "@connectrpc/connect";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SessionLeaseService } from "../../gen/mecatl/driver/v1/session_lease_pb.js";
import { startServer } from "../helpers/server.js";
import { grpcClient } from "../helpers/clients.js";

/** `--store-timeout` of the server (its busy timeout is three quarters of it: 300 ms). */
const STORE_TIMEOUT_MS = 400;
/** Acquires sent at once: more than one group commit takes (16 at first). */
const CALLS = 40;

/**
 * A write still waiting unstarted when its `--store-timeout` runs out is
 * cancelled by the main thread and answered "nothing was written"; it never
 * runs afterwards (services/storage/sqlite-write-claims.ts). Before, the
 * main thread's timer could not tell a queued write from a running one and
 * answered "it may still be committed". Here another connection holds the
 * write lock: the first group waits for it and fails as locked, the writes
 * queued behind it pass their deadline unstarted.
 */
describe("SQLite writes that time out before they start", () => {
  const cleanups: Array<() => unknown> = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  test("are answered 'nothing was written' and never applied, even once the lock is free", async () => {
    const dir = mkdtempSync(join(tmpdir(), "mecatl-unstarted-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const path = join(dir, "store.sqlite");
    const server = await startServer(["session-lease", "--store", `sqlite:${path}`, "--store-timeout", `${STORE_TIMEOUT_MS}ms`]);
    cleanups.push(() => server.stop());
    const leases = grpcClient(SessionLeaseService, server.address);
    await leases.acquire({ sessionId: "warm", owner: "a" });
    const other = new Database(path);
    cleanups.push(() => other.close());
    other.exec("BEGIN IMMEDIATE");
    // Let go of the lock after the calls' deadline, while the writer waits for it again: the writes it then finds cancelled must not run.
    const released = new Promise<void>((resolve) =>
      setTimeout(() => {
        other.exec("ROLLBACK");
        resolve();
      }, STORE_TIMEOUT_MS + 100),
    );
    const outcomes = await Promise.all(
      Array.from({ length: CALLS }, (_, i) =>
        leases.acquire({ sessionId: `queued-${i}`, owner: "a" }).then(
          () => ({ id: `queued-${i}`, code: "OK", message: "" }),
          (err: unknown) => {
            const e = ConnectError.from(err);
            return { id: `queued-${i}`, code: Code[e.code], message: e.rawMessage };
          },
        ),
      ),
    );
    await released;
    expect(new Set(outcomes.map((o) => o.code))).toEqual(new Set(["Unavailable"]));
    // Every one of them says nothing was written: locked (the group that waited for the lock) or not started.
    expect(outcomes.filter((o) => !o.message.endsWith("; nothing was written"))).toEqual([]);
    const unstarted = outcomes.filter((o) => o.message.includes(`did not start the operation within ${STORE_TIMEOUT_MS} ms (--store-timeout)`));
    expect(unstarted.length).toBeGreaterThanOrEqual(1);
    // Give the writer time to take the lock and reach the cancelled writes, then check that none ran.
    await new Promise((r) => setTimeout(r, 300));
    for (const { id } of outcomes) {
      const granted = await leases.acquire({ sessionId: id, owner: "b" });
      expect(granted.lease?.owner).toBe("b");
    }
  });
});
