/**
 * OpenTelemetry tracing (issue 14, deliverable 5), checked end to end: a
 * server spawned with the standard `OTEL_*` variables exports OTLP/HTTP JSON
 * to a receiver this test runs (test/helpers/otlp-receiver.ts), on every
 * backend. Spans are read after the server stopped, which flushes them.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { createHash, randomBytes, randomUUID } from "node:crypto";
import * as grpc from "@grpc/grpc-js";
import { toBinary, create } from "@bufbuild/protobuf";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { EventLogService, ReadAfterRequestSchema } from "../../gen/mecatl/driver/v1/event_log_pb.js";
import { SessionLeaseService } from "../../gen/mecatl/driver/v1/session_lease_pb.js";
import { ScheduleStoreService } from "../../gen/mecatl/driver/v1/schedule_store_pb.js";
import { allBackends } from "../helpers/backends.js";
import { startServer, runServeExpectingFailure } from "../helpers/server.js";
import { rawGrpcClient, rawUnary, callWithBytes } from "../helpers/raw-grpc.js";
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from "../helpers/otlp-receiver.js";
import { scheduleRecord } from "../helpers/schedules.js";
import { rpcsInFlight } from "../helpers/metrics.js";
import { waitFor } from "../helpers/wait.js";

const SERVER = 2;
/** The hash the README documents: first 16 hex characters of SHA-256 over the id's UTF-8 bytes (computed here independently). */
const hashed = (id: string) => createHash("sha256").update(Buffer.from(id, "utf8")).digest("hex").slice(0, 16);
const traceparent = () => ({ traceId: randomBytes(16).toString("hex"), spanId: randomBytes(8).toString("hex") });
const withTraceparent = (t: { traceId: string; spanId: string }) => {
  const md = new grpc.Metadata();
  md.set("traceparent", `00-${t.traceId}-${t.spanId}-01`);
  return md;
};

/** Env that turns tracing on and exports to `receiver` quickly. */
function otelEnv(receiver: OtlpReceiver): NodeJS.ProcessEnv {
  return {
    OTEL_TRACES_EXPORTER: "otlp",
    OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
    OTEL_BSP_SCHEDULE_DELAY: "50",
    OTEL_SERVICE_NAME: "mecatl-drivers-under-test",
  };
}

describe.each(allBackends())("tracing on $name", (backend) => {
  const sqlite = backend.name.startsWith("sqlite");
  // Ids that must never appear raw in what is exported.
  const sessionId = `raw-session-${randomUUID()}`;
  const missingId = `raw-missing-${randomUUID()}`;
  const scheduleName = `raw-schedule-${randomUUID()}`;
  const owner = `raw-owner-${randomUUID()}`;
  const appendIds = Array.from({ length: 8 }, () => `raw-append-${randomUUID()}`);
  const saveParent = traceparent();
  const connectParent = traceparent();
  /** Server span names expected, one per call made. */
  const calls: string[] = [];
  let receiver: OtlpReceiver;
  let spans: ReceivedSpan[] = [];
  const servers = () => spans.filter((s) => s.kind === SERVER);
  const childrenOf = (s: ReceivedSpan) => spans.filter((c) => c.parentSpanId === s.spanId && c.traceId === s.traceId);
  const serverSpan = (method: string, pred: (s: ReceivedSpan) => boolean = () => true) => {
    const found = servers().filter((s) => s.attributes["rpc.method"] === method && pred(s));
    expect(found, method).toHaveLength(1);
    return found[0]!;
  };

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    const { store } = await backend.setup();
    const server = await startServer(["--store", store, "--connect-listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"], { env: otelEnv(receiver) });
    const sessions = rawGrpcClient(SessionStoreService, server.address);
    const log = rawGrpcClient(EventLogService, server.address);
    const leases = rawGrpcClient(SessionLeaseService, server.address);
    const schedules = rawGrpcClient(ScheduleStoreService, server.address);
    const call = async <T>(name: string, p: Promise<T>) => {
      calls.push(name);
      return p;
    };
    const snapshot = { format: "sessnap-json/1", payload: Buffer.from(`{"id":"${sessionId}"}`) };
    await call("mecatl.driver.v1.SessionStoreService/Save", rawUnary(sessions, SessionStoreService.method.save, { sessionId, snapshot }, withTraceparent(saveParent)));
    await call("mecatl.driver.v1.SessionStoreService/Load", rawUnary(sessions, SessionStoreService.method.load, { sessionId }));
    await call("mecatl.driver.v1.SessionStoreService/Load", rawUnary(sessions, SessionStoreService.method.load, { sessionId: missingId }).catch((e: grpc.ServiceError) => e));
    await call("mecatl.driver.v1.SessionStoreService/Save", rawUnary(sessions, SessionStoreService.method.save, { sessionId: "", snapshot }).catch((e: grpc.ServiceError) => e));
    // Concurrent appends, so that the SQLite worker may commit several in one transaction.
    await Promise.all(
      appendIds.map((id) =>
        call("mecatl.driver.v1.EventLogService/Append", rawUnary(log, EventLogService.method.append, { sessionId: id, event: { format: "eventlog-json/1", payload: Buffer.from(`{"s":"${id}"}`) } })),
      ),
    );
    const read = await call(
      "mecatl.driver.v1.EventLogService/ReadAfter",
      callWithBytes(log, "/mecatl.driver.v1.EventLogService/ReadAfter", toBinary(ReadAfterRequestSchema, create(ReadAfterRequestSchema, { sessionId: appendIds[0]!, cursor: "" })), { streaming: true }),
    );
    expect(read.code).toBe(grpc.status.OK);
    const followed = await call(
      "mecatl.driver.v1.EventLogService/ReadAfter",
      callWithBytes(log, "/mecatl.driver.v1.EventLogService/ReadAfter", toBinary(ReadAfterRequestSchema, create(ReadAfterRequestSchema, { sessionId: appendIds[1]!, cursor: "", follow: true })), {
        streaming: true,
        endAfter: (m) => m.length >= 1,
      }),
    );
    expect(followed.cancelledByClient).toBe(true);
    // The server has seen the cancellation (and ended the span) once the call is no longer in flight.
    await waitFor(async () => (await rpcsInFlight(server.metricsAddress!, "ReadAfter")) === 0, 10_000, "the cancelled follow to end on the server");
    const { lease } = await call("mecatl.driver.v1.SessionLeaseService/Acquire", rawUnary(leases, SessionLeaseService.method.acquire, { sessionId, owner }));
    await call("mecatl.driver.v1.SessionLeaseService/Renew", rawUnary(leases, SessionLeaseService.method.renew, { lease }));
    await call("mecatl.driver.v1.ScheduleStoreService/SaveSchedule", rawUnary(schedules, ScheduleStoreService.method.saveSchedule, { name: scheduleName, schedule: scheduleRecord({ Name: scheduleName }) }));
    await call("mecatl.driver.v1.ScheduleStoreService/LoadSchedule", rawUnary(schedules, ScheduleStoreService.method.loadSchedule, { name: scheduleName }));
    const viaConnect = await call(
      "mecatl.driver.v1.SessionStoreService/Load",
      fetch(`http://${server.connectAddress}/mecatl.driver.v1.SessionStoreService/Load`, {
        method: "POST",
        headers: { "content-type": "application/json", traceparent: `00-${connectParent.traceId}-${connectParent.spanId}-01` },
        body: JSON.stringify({ sessionId }),
      }),
    );
    expect(viaConnect.status).toBe(200);
    for (const c of [sessions, log, leases, schedules]) c.close();
    expect(await server.stop()).toBe(0);
    await backend.teardown();
    spans = [...receiver.spans];
  });
  afterAll(() => receiver?.close());

  test("every RPC is exactly one server span named <package.Service>/<Method>, on both listeners", () => {
    expect(servers().map((s) => s.name).sort()).toEqual([...calls].sort());
    for (const s of servers()) {
      expect(s.name).toBe(`${s.attributes["rpc.service"]}/${s.attributes["rpc.method"]}`);
      expect(s.resource["service.name"]).toBe("mecatl-drivers-under-test");
      expect(s.endNs).toBeGreaterThanOrEqual(s.startNs);
    }
  });

  test("server spans carry the status code, the backend and the protocol", () => {
    const backendKind = sqlite ? "sqlite" : "redis";
    for (const s of servers()) expect(s.attributes["mecatl.backend"]).toBe(backendKind);
    expect(serverSpan("Load", (s) => s.attributes["mecatl.session.id_hash"] === hashed(missingId)).attributes["rpc.grpc.status_code"]).toBe(grpc.status.NOT_FOUND);
    const invalid = serverSpan("Save", (s) => s.attributes["rpc.grpc.status_code"] !== 0);
    expect(invalid.attributes["rpc.grpc.status_code"]).toBe(grpc.status.INVALID_ARGUMENT);
    expect(childrenOf(invalid)).toEqual([]); // rejected before the store
    expect(serverSpan("ReadAfter", (s) => s.attributes["rpc.grpc.status_code"] === 0).attributes["mecatl.session.id_hash"]).toBe(hashed(appendIds[0]!));
    // A follow stream's span lasts until the client cancels it.
    const follow = serverSpan("ReadAfter", (s) => s.attributes["rpc.grpc.status_code"] !== 0);
    expect(follow.attributes["rpc.grpc.status_code"]).toBe(grpc.status.CANCELLED);
    expect(follow.attributes["mecatl.session.id_hash"]).toBe(hashed(appendIds[1]!));
    const fromConnect = servers().filter((s) => s.attributes["rpc.system"] === "connect_rpc");
    expect(fromConnect.map((s) => s.name)).toEqual(["mecatl.driver.v1.SessionStoreService/Load"]);
    expect(servers().filter((s) => s.attributes["rpc.system"] === "grpc")).toHaveLength(calls.length - 1);
  });

  test("session ids and schedule names appear only hashed, never raw, anywhere in the export", () => {
    expect(serverSpan("Save", (s) => s.attributes["rpc.grpc.status_code"] === 0).attributes["mecatl.session.id_hash"]).toBe(hashed(sessionId));
    expect(serverSpan("Acquire").attributes["mecatl.session.id_hash"]).toBe(hashed(sessionId));
    expect(serverSpan("Renew").attributes["mecatl.session.id_hash"]).toBe(hashed(sessionId)); // from lease.session_id
    expect(serverSpan("SaveSchedule").attributes["mecatl.schedule.id_hash"]).toBe(hashed(scheduleName));
    expect(serverSpan("LoadSchedule").attributes["mecatl.schedule.id_hash"]).toBe(hashed(scheduleName));
    const appended = servers().filter((s) => s.attributes["rpc.method"] === "Append").map((s) => s.attributes["mecatl.session.id_hash"]);
    expect(appended.sort()).toEqual(appendIds.map(hashed).sort());
    const exported = receiver.bodies.join("\n");
    expect(exported.length).toBeGreaterThan(0);
    for (const raw of [sessionId, missingId, scheduleName, owner, ...appendIds]) expect(exported).not.toContain(raw);
  });

  test("a traceparent from the caller makes the server span its child (gRPC metadata and Connect headers)", () => {
    const save = serverSpan("Save", (s) => s.attributes["rpc.grpc.status_code"] === 0);
    expect({ traceId: save.traceId, parent: save.parentSpanId }).toEqual({ traceId: saveParent.traceId, parent: saveParent.spanId });
    const connect = serverSpan("Load", (s) => s.attributes["rpc.system"] === "connect_rpc");
    expect({ traceId: connect.traceId, parent: connect.parentSpanId }).toEqual({ traceId: connectParent.traceId, parent: connectParent.spanId });
    const plain = serverSpan("Load", (s) => s.attributes["mecatl.session.id_hash"] === hashed(sessionId) && s.attributes["rpc.system"] === "grpc");
    expect(plain.parentSpanId).toBe("");
    expect(plain.traceId).not.toBe(saveParent.traceId);
  });

  test("each store operation is a child span of its server span, with the backend", () => {
    const expected: Array<[string, (s: ReceivedSpan) => boolean, string]> = [
      ["Save", (s) => s.attributes["rpc.grpc.status_code"] === 0, "SessionStore.save"],
      ["Load", (s) => s.attributes["rpc.system"] === "connect_rpc", "SessionStore.load"],
      ["Acquire", () => true, "SessionLeaseStore.acquire"],
      ["SaveSchedule", () => true, "ScheduleStore.mutate"],
      ["ReadAfter", (s) => s.attributes["rpc.grpc.status_code"] === 0, "EventLogStore.readPage"],
      ["ReadAfter", (s) => s.attributes["rpc.grpc.status_code"] !== 0, "EventLogStore.readPage"],
    ];
    for (const [method, pred, storeSpan] of expected) {
      const stores = childrenOf(serverSpan(method, pred)).filter((c) => c.name.includes("Store."));
      expect(stores.map((c) => c.name), method).toContain(storeSpan);
      for (const c of stores) {
        expect(c.attributes["mecatl.backend"]).toBe(sqlite ? "sqlite" : "redis");
        expect(c.attributes["db.system.name"]).toBe(sqlite ? "sqlite" : "redis");
        expect(c.startNs).toBeGreaterThanOrEqual(serverSpan(method, pred).startNs);
      }
    }
    for (const append of servers().filter((s) => s.attributes["rpc.method"] === "Append")) {
      expect(childrenOf(append).map((c) => c.name)).toEqual(["EventLogStore.append"]);
    }
  });

  test(sqlite ? "every SQLite write has a group-commit child span of its store span; reads have none" : "Redis writes have no group-commit span", () => {
    const commits = spans.filter((s) => s.name === "SQLite group commit");
    const writes = ["SessionStore.save", "EventLogStore.append", "SessionLeaseStore.acquire", "SessionLeaseStore.renew", "ScheduleStore.mutate"];
    const writeSpans = spans.filter((s) => writes.includes(s.name));
    expect(writeSpans).toHaveLength(4 + appendIds.length); // one Save, Acquire, Renew and SaveSchedule each, and the Appends
    if (!sqlite) {
      expect(commits).toEqual([]);
      return;
    }
    for (const store of writeSpans) {
      const mine = childrenOf(store).filter((c) => c.name === "SQLite group commit");
      expect(mine, store.name).toHaveLength(1);
      const commit = mine[0]!;
      expect(commit.attributes["mecatl.group_commit.size"]).toBeGreaterThanOrEqual(1);
      expect(commit.endNs).toBeGreaterThanOrEqual(commit.startNs);
      // The worker's clock and the main thread's agree to within a few milliseconds: each thread counts from the
      // wall-clock time it started at, and a wall clock being slewed (up to 0.5 ms per second) moves the starts of
      // threads begun seconds apart by up to a few ms (a CI run saw 1.35 ms while the host's clock was being corrected).
      expect(commit.startNs).toBeGreaterThanOrEqual(store.startNs - 10_000_000n);
      expect(commit.endNs).toBeLessThanOrEqual(store.endNs + 10_000_000n);
    }
    for (const load of spans.filter((s) => s.name === "SessionStore.load" || s.name === "EventLogStore.readPage")) {
      expect(childrenOf(load).filter((c) => c.name === "SQLite group commit")).toEqual([]);
    }
    // Writes committed together report the same transaction: as many spans share its times as its size says.
    const byCommit = new Map<string, ReceivedSpan[]>();
    for (const c of commits) byCommit.set(`${c.startNs}-${c.endNs}`, [...(byCommit.get(`${c.startNs}-${c.endNs}`) ?? []), c]);
    for (const group of byCommit.values()) expect(group.length).toBe(group[0]!.attributes["mecatl.group_commit.size"]);
    expect(commits).toHaveLength(writeSpans.length);
  });
});

describe("tracing off", () => {
  test("OTEL_TRACES_EXPORTER=none exports nothing, even with an endpoint set", async () => {
    const receiver = await startOtlpReceiver();
    try {
      const server = await startServer(["--store", "sqlite::memory:"], { env: { ...otelEnv(receiver), OTEL_TRACES_EXPORTER: "none" } });
      const sessions = rawGrpcClient(SessionStoreService, server.address);
      await rawUnary(sessions, SessionStoreService.method.save, { sessionId: "quiet", snapshot: { format: "sessnap-json/1", payload: Buffer.from("{}") } });
      sessions.close();
      expect(await server.stop()).toBe(0);
      expect(server.stderr.some((l) => l.includes('"tracing on"'))).toBe(false);
      expect(receiver.bodies).toEqual([]);
    } finally {
      await receiver.close();
    }
  });

  test.each([
    [{ OTEL_TRACES_EXPORTER: "zipkin" }, "OTEL_TRACES_EXPORTER"],
    [{ OTEL_TRACES_EXPORTER: "otlp", OTEL_EXPORTER_OTLP_PROTOCOL: "http/xml" }, "OTEL_EXPORTER_OTLP_PROTOCOL"],
    [{ OTEL_TRACES_EXPORTER: "otlp", OTEL_TRACES_SAMPLER: "sometimes" }, "OTEL_TRACES_SAMPLER"],
    [{ OTEL_TRACES_EXPORTER: "otlp", OTEL_TRACES_SAMPLER: "traceidratio", OTEL_TRACES_SAMPLER_ARG: "1.5" }, "OTEL_TRACES_SAMPLER_ARG"],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4318" }, "OTEL_EXPORTER_OTLP_ENDPOINT"],
    [{ OTEL_TRACES_EXPORTER: "otlp", OTEL_PROPAGATORS: "b3" }, "OTEL_PROPAGATORS"],
    [{ OTEL_TRACES_EXPORTER: "otlp", OTEL_BSP_SCHEDULE_DELAY: "soon" }, "OTEL_BSP_SCHEDULE_DELAY"],
  ])("%j is refused at start, naming %s", async (env, name) => {
    const { code, stderr } = await runServeExpectingFailure(["--listen", "127.0.0.1:0", "--store", "sqlite::memory:"], 15_000, env);
    expect(code).toBe(2);
    expect(stderr).toMatch(new RegExp(`^mecatl-drivers: ${name}=`));
  });
});
