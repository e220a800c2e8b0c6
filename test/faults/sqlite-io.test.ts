import { afterEach, describe, expect, test } from "vitest";
import { Code } from "@connectrpc/connect";
import Database from "better-sqlite3";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { EventLogService } from "../../gen/mecatl/driver/v1/event_log_pb.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { grpcClient } from "../helpers/clients.js";
import { body, ev, readAfterAll } from "../helpers/event-log.js";
import { waitFor } from "../helpers/wait.js";
import { traceUnavailable } from "../helpers/syscall-trace.js";
import { missingPrerequisite } from "../helpers/prerequisite.js";
import { overallHealth, timed, ServingStatus as Status, type TimedOutcome } from "../helpers/observe.js";
import { DISK_PROBE_INTERVAL_MS } from "../../services/storage/sqlite-database.js";

/** `--store-timeout` of these servers. */
const STORE_TIMEOUT_MS = 1000;
/** Slack for process scheduling on a shared machine. */
const MARGIN_MS = 3000;
/**
 * `--store-timeout` of the lock test: its busy timeout (¾ of it, {@link LOCK_BUSY_MS}) ends a second
 * before the call's deadline, so the lock's own answer always comes first.
 */
const LOCK_STORE_TIMEOUT_MS = 4000;
const LOCK_BUSY_MS = (LOCK_STORE_TIMEOUT_MS * 3) / 4;


/**
 * An SQLite store that does not answer in time or cannot write its files
 * (issue 9): the call must end with UNAVAILABLE within `--store-timeout`
 * (plus scheduling slack), saying whether the write may still happen. Before,
 * a write waited for the lock for the fixed 5 s busy timeout and then failed
 * as INTERNAL, a stalled disk held every call for as long as it stalled, and
 * an I/O error was INTERNAL with health SERVING.
 */
describe("SQLite stalls and I/O errors", () => {
  let dir = "";
  let server: ServerProcess | undefined;
  let tracer: ChildProcess | undefined;
  afterEach(async () => {
    tracer?.kill("SIGKILL");
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
    tracer = server = undefined;
  });

  test("a write lock held by another process: UNAVAILABLE, nothing written; reads go on; writes work once it is released", async () => {
    dir = mkdtempSync(join(tmpdir(), "mecatl-sqlite-"));
    const path = join(dir, "store.sqlite");
    server = await startServer(["--store", `sqlite:${path}`, "--store-timeout", `${LOCK_STORE_TIMEOUT_MS}ms`]);
    const events = grpcClient(EventLogService, server.address);
    await events.append({ sessionId: "locked", event: ev({ n: 1 }) });

    const other = new Database(path);
    try {
      other.exec("BEGIN IMMEDIATE");
      const write = await timed(events.append({ sessionId: "locked", event: ev({ n: 2 }) }));
      expect(write.error?.code, write.error?.message).toBe(Code.Unavailable);
      // The lock's own error comes at the busy timeout, a full second before the call's deadline
      // (which would answer "may still be committed" instead): the write was never begun.
      expect(write.error?.rawMessage).toBe(
        `the SQLite database stayed locked by another connection for more than ${LOCK_BUSY_MS} ms (database is locked); nothing was written`,
      );
      expect(write.ms).toBeGreaterThanOrEqual(LOCK_BUSY_MS);
      expect(write.ms).toBeLessThan(LOCK_STORE_TIMEOUT_MS + MARGIN_MS);
      expect(await readAfterAll(events, { sessionId: "locked" })).toHaveLength(1);
    } finally {
      if (other.inTransaction) other.exec("ROLLBACK");
      other.close();
    }
    await events.append({ sessionId: "locked", event: ev({ n: 3 }) });
    expect(await readAfterAll(events, { sessionId: "locked" })).toHaveLength(2);
  });

  test("a disk whose fsync stalls: the write answers UNAVAILABLE 'may still be committed' in time, and it does commit", async (ctx) => {
    const unavailable = traceUnavailable();
    if (unavailable !== undefined) return missingPrerequisite(ctx, unavailable);
    dir = mkdtempSync(join(tmpdir(), "mecatl-sqlite-"));
    server = await startServer(["--store", `sqlite:${join(dir, "store.sqlite")}`, "--store-timeout", `${STORE_TIMEOUT_MS}ms`]);
    const events = grpcClient(EventLogService, server.address);
    await events.append({ sessionId: "stall", event: ev({ n: 1 }) });

    // Every fsync/fdatasync of the server (all threads) now takes STORE_TIMEOUT_MS + 1 s.
    const delayUs = (STORE_TIMEOUT_MS + 1000) * 1000;
    tracer = spawn("strace", ["-f", "-qq", "-p", String(server.proc.pid), "-e", "trace=fsync,fdatasync", "-e", `inject=fsync,fdatasync:delay_enter=${delayUs}`], { stdio: ["ignore", "ignore", "pipe"] });
    let traced = "";
    tracer.stderr!.setEncoding("utf8").on("data", (c: string) => (traced += c));
    // strace prints each traced call; wait until it is attached by provoking one that we then discard.
    await waitFor(async () => {
      await events.append({ sessionId: "warm-up", event: ev({ n: 0 }) }).catch(() => undefined);
      return /sync\(/.test(traced);
    }, 10_000, "strace to attach");
    // Let the stalled warm-up commit finish, so the write below is the one that stalls.
    await waitFor(async () => (await timed(readAfterAll(events, { sessionId: "stall" }))).error === undefined, 10_000, "the worker to be free again");

    // The writer may still be in a stalled fsync of its own (the WAL truncation it does after an idle second): a write
    // queued behind it is cancelled unstarted at its deadline ("nothing was written", and it never appears); the next
    // one is sent until one starts and stalls in its commit.
    let n = 2;
    for (; ; n++) {
      const write = await timed(events.append({ sessionId: "stall", event: ev({ n }) }));
      expect(write.error?.code, write.error?.message).toBe(Code.Unavailable);
      expect(write.ms).toBeLessThan(STORE_TIMEOUT_MS + MARGIN_MS);
      if (write.error!.rawMessage.includes("may still be committed")) break;
      expect(write.error!.rawMessage).toBe(`the SQLite database did not start the operation within ${STORE_TIMEOUT_MS} ms (--store-timeout); nothing was written`);
      expect(n, "writes cancelled before one started").toBeLessThan(6);
    }
    tracer.kill("SIGKILL");
    // The outcome was unknown, not negative: the commit finishes once the disk answers; the cancelled writes never do.
    await waitFor(async () => (await readAfterAll(events, { sessionId: "stall" })).length === 2, 10_000, "the stalled write to commit");
    await new Promise((r) => setTimeout(r, 200));
    const stored = await readAfterAll(events, { sessionId: "stall" });
    expect(stored.map((r) => body(r.event?.payload).n)).toEqual([1, n]);
  });

  test("writes that get EIO: UNAVAILABLE, health NOT_SERVING, nothing written; SERVING again once writes succeed", async (ctx) => {
    const unavailable = traceUnavailable();
    if (unavailable !== undefined) return missingPrerequisite(ctx, unavailable);
    dir = mkdtempSync(join(tmpdir(), "mecatl-sqlite-"));
    server = await startServer(["--store", `sqlite:${join(dir, "store.sqlite")}`, "--store-timeout", `${STORE_TIMEOUT_MS}ms`]);
    const events = grpcClient(EventLogService, server.address);
    await events.append({ sessionId: "eio", event: ev({ n: 1 }) });

    // Every write(2)-family call of the server now fails with EIO.
    tracer = spawn("strace", ["-f", "-qq", "-p", String(server.proc.pid), "-e", "trace=pwrite64,pwritev,pwritev2", "-e", "inject=pwrite64,pwritev,pwritev2:error=EIO"], { stdio: ["ignore", "ignore", "ignore"] });
    let failed: TimedOutcome | undefined;
    let acknowledged = 1;
    await waitFor(async () => {
      const r = await timed(events.append({ sessionId: "eio", event: ev({ n: 2 }) }));
      if (r.error !== undefined) failed = r;
      else acknowledged++;
      return failed !== undefined;
    }, 10_000, "a write to fail once strace injects EIO");
    expect(failed!.error!.code, failed!.error!.message).toBe(Code.Unavailable);
    expect(failed!.error!.rawMessage).toContain("failed to read or write its files");
    expect(failed!.ms).toBeLessThan(STORE_TIMEOUT_MS + MARGIN_MS);
    await waitFor(async () => (await overallHealth(server!.address)) === Status.NOT_SERVING, MARGIN_MS, "NOT_SERVING after an I/O error");

    tracer.kill("SIGKILL");
    await waitFor(async () => (await overallHealth(server!.address)) === Status.SERVING, DISK_PROBE_INTERVAL_MS + MARGIN_MS, "SERVING once writes succeed again");
    await events.append({ sessionId: "eio", event: ev({ n: 3 }) });
    expect(await readAfterAll(events, { sessionId: "eio" })).toHaveLength(acknowledged + 1);
  });
});
