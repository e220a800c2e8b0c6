import { EventEmitter, once } from "node:events";
import { afterEach, describe, expect, test } from "vitest";
import { Code, ConnectError } from "@connectrpc/connect";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { EventLogService, type ReadAfterResponseSchema } from "../../gen/mecatl/driver/v1/event_log_pb.js";
import { startStubServer, stub, type StubServer } from "../helpers/stub-server.js";
import { runCli } from "../helpers/cli.js";
import { openDriverClients, type DriverClients } from "../../clients/factory.js";
import { runWorkload } from "../../clients/workload/run.js";
import { DEFAULT_WORKLOAD } from "../../clients/workload/context.js";
import { LeaseLedger } from "../../clients/workload/lease-ledger.js";
import { ClaimLedger } from "../../clients/workload/scheduler.js";
import { Violations } from "../../clients/workload/model.js";
import { summarize } from "../../clients/workload/report.js";

/*
 * The workload's checks must be able to fail. These tests feed them broken
 * histories directly, and run the workload against a scripted driver that
 * loses snapshots or repeats events to followers.
 */

const S = 1_000_000_000n;

describe("lease and claim ledgers", () => {
  test("an overlap, a renewal after takeover and a non-rising token are violations", () => {
    const ledger = new LeaseLedger();
    const v = new Violations();
    const now = Date.now();
    const ns = (ms: number) => BigInt(Math.round(ms)) * 1_000_000n;
    ledger.acquired({ sessionId: "s", owner: "a", token: 5n, expiry: ns(now + 30_000) }, now);
    ledger.acquired({ sessionId: "s", owner: "b", token: 5n, expiry: ns(now + 31_000) }, now + 1_000);
    ledger.renewed({ sessionId: "s", owner: "a", token: 5n, expiry: ns(now + 32_000) }, now + 2_000);
    ledger.check(v);
    expect(v.count("no two owners hold one lease")).toBe(2);
    expect(v.count("lease tokens rise on takeover")).toBe(1);
  });

  test("a clean handover after release or expiry passes", () => {
    const ledger = new LeaseLedger();
    const v = new Violations();
    const now = Date.now();
    const ns = (ms: number) => BigInt(ms) * 1_000_000n;
    ledger.acquired({ sessionId: "s", owner: "a", token: 1n, expiry: ns(now + 1_000) }, now);
    ledger.released({ sessionId: "s", owner: "a", token: 1n, expiry: 0n }, now + 500);
    ledger.acquired({ sessionId: "s", owner: "b", token: 2n, expiry: ns(now + 1_600) }, now + 600);
    ledger.acquired({ sessionId: "s", owner: "c", token: 3n, expiry: ns(now + 4_000) }, now + 1_700);
    ledger.check(v);
    expect(v.total).toBe(0);
  });

  test("a slot claimed twice is a violation", () => {
    const claims = new ClaimLedger();
    const v = new Violations();
    claims.claimed("x", 10n * S);
    claims.claimed("x", 11n * S);
    claims.check(v);
    expect(v.total).toBe(0);
    claims.claimed("x", 11n * S);
    claims.check(v);
    expect(v.count("no slot fires twice")).toBe(1);
  });
});

describe("the workload against a driver that misbehaves", () => {
  let server: StubServer | undefined;
  let clients: DriverClients | undefined;
  afterEach(async () => {
    clients?.close();
    await server?.close();
  });

  /** A session store that keeps only the first snapshot of each session, and an event log that shows followers event 2 twice. */
  async function faultyDriver(): Promise<StubServer> {
    const snapshots = new Map<string, Uint8Array>();
    const logs = new Map<string, Uint8Array[]>();
    const appended = new EventEmitter().setMaxListeners(0);
    const record = (id: string, i: number): MessageInitShape<typeof ReadAfterResponseSchema> => ({ kind: "event", event: { format: "eventlog-json/1", payload: logs.get(id)![i]! }, cursor: `${id}#${i + 1}` });
    return startStubServer([
      stub(SessionStoreService, {
        capabilities: () => ({ contract: "session-store/1", list: true, delete: true, create: true }),
        create: (req) => (snapshots.set(req.sessionId, req.snapshot!.payload), {}),
        save: (req) => (snapshots.has(req.sessionId) ? undefined : snapshots.set(req.sessionId, req.snapshot!.payload), {}),
        load: (req) => {
          const payload = snapshots.get(req.sessionId);
          if (payload === undefined) throw new ConnectError("not found", Code.NotFound);
          return { snapshot: { format: "sessnap-json/1", payload } };
        },
        delete: (req) => (snapshots.delete(req.sessionId), {}),
      }),
      stub(EventLogService, {
        append: (req) => {
          const log = logs.get(req.sessionId) ?? [];
          logs.set(req.sessionId, log);
          log.push(req.event!.payload);
          appended.emit("append");
          return { cursor: `${req.sessionId}#${log.length}` };
        },
        async *readAfter(req, ctx) {
          let next = req.cursor === "" ? 0 : Number(req.cursor.split("#").pop());
          let repeated = false;
          for (;;) {
            const log = logs.get(req.sessionId) ?? [];
            while (next < log.length) {
              yield record(req.sessionId, next);
              if (req.follow && next === 1 && !repeated) {
                repeated = true;
                yield record(req.sessionId, next);
              }
              next++;
            }
            if (!req.follow || ctx.signal.aborted) return;
            // Parked until the next append (or the call ends).
            await once(appended, "append", { signal: ctx.signal }).catch(() => undefined);
          }
        },
      }),
    ]);
  }

  test("lost snapshots and repeated events are reported as violations", async () => {
    server = await faultyDriver();
    clients = await openDriverClients({ sessionStoreUrl: server.address, eventLogUrl: server.address });
    const result = await runWorkload(
      { sessionStore: clients.sessionStore!, eventLog: clients.eventLog },
      { ...DEFAULT_WORKLOAD, runId: "faulty", durationMs: 1_500, processes: 1, sessions: 2, watchers: 2, reconnectMs: 0, drainMs: 3_000, maxSnapshotBytes: 4 << 20 },
    );
    const summary = summarize(result);
    expect(summary.ok).toBe(false);
    const failed = new Map(summary.checks.map((c) => [c.check, c.violations]));
    expect(failed.get("acknowledged snapshots are readable")).toBeGreaterThan(0);
    expect(failed.get("watchers see every event exactly once, in order")).toBeGreaterThan(0);
    expect(failed.get("acknowledged events are readable, in order")).toBe(0);
    expect(summary.checks.find((c) => c.check === "no slot fires twice")?.checked).toBe(false);
  });

  test("the workload command exits 1 and prints FAIL when a check fails", async () => {
    server = await faultyDriver();
    const r = await runCli(["workload", "--session-store-url", server.address, "--duration", "1s", "--processes", "1", "--sessions", "1", "--quiet"]);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/acknowledged snapshots are readable\s+FAIL/);
    expect(r.stdout).toContain("FAILED");
  });
});
