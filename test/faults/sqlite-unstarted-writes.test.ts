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
/** The burst test's `--store-timeout` and calls: enough for the main thread to be busy when deadlines pass. */
const BURST_TIMEOUT_MS = 200;
const BURST_CALLS = 3000;
const BURST_WAVES = 3;

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

  /** A lease server on a fresh SQLite file with `--store-timeout timeoutMs`, and another connection holding that file's write lock. */
  async function lockedStore(timeoutMs: number) {
    const dir = mkdtempSync(join(tmpdir(), "mecatl-unstarted-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const path = join(dir, "store.sqlite");
    const server = await startServer(["session-lease", "--store", `sqlite:${path}`, "--store-timeout", `${timeoutMs}ms`]);
    cleanups.push(() => server.stop());
    const leases = grpcClient(SessionLeaseService, server.address);
    await leases.acquire({ sessionId: "warm", owner: "a" });
    const other = new Database(path);
    cleanups.push(() => other.close());
    other.exec("BEGIN IMMEDIATE");
    return { leases, other };
  }

  test("are answered 'nothing was written' and never applied, even once the lock is free", async () => {
    const { leases, other } = await lockedStore(STORE_TIMEOUT_MS);
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

  test("under a burst, a write the writer already answered is left to its answer, not called 'may still be committed'", async () => {
    // The writer drops a write whose deadline passed (its own check) and frees its slot; when this
    // busy thread's timer then runs before that answer arrives, the write is not running: only the
    // answer can say what happened. Here the lock is held throughout, so nothing can be written.
    const { leases, other } = await lockedStore(BURST_TIMEOUT_MS);
    const outcomes: string[] = [];
    for (let wave = 0; wave < BURST_WAVES; wave++) {
      const answers = await Promise.all(
        Array.from({ length: BURST_CALLS }, (_, i) =>
          leases.acquire({ sessionId: `burst-${wave}-${i}`, owner: "a" }).then(
            () => "OK",
            (err: unknown) => ConnectError.from(err).rawMessage,
          ),
        ),
      );
      outcomes.push(...answers);
    }
    other.exec("ROLLBACK");
    const counts = new Map<string, number>();
    for (const o of outcomes) {
      const kind = o.endsWith("; nothing was written") ? "nothing was written" : o;
      counts.set(kind, (counts.get(kind) ?? 0) + 1);
    }
    expect(Object.fromEntries(counts)).toEqual({ "nothing was written": BURST_WAVES * BURST_CALLS });
  });
});
