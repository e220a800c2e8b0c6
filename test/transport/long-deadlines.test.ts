import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { gzipSync } from "node:zlib";
import * as grpc from "@grpc/grpc-js";
import { create, toBinary } from "@bufbuild/protobuf";
import { EventLogService } from "../../gen/mecatl/driver/v1/event_log_pb.js";
import { SessionLeaseService } from "../../gen/mecatl/driver/v1/session_lease_pb.js";
import { Health } from "../../gen/grpc/health/v1/health_pb.js";
import { conformanceBackends, type TestBackend } from "../helpers/backends.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { callWithBytes, rawGrpcClient, rawUnary } from "../helpers/raw-grpc.js";
import { grpcFramed, h2GrpcCall } from "../helpers/h2-grpc-call.js";
import { EVENT_FORMAT } from "../helpers/event-log.js";
import { connectStream } from "../helpers/connect-stream.js";
import { openDriverClients, type DriverClients } from "../../clients/factory.js";
import { SessionNotFoundError } from "../../clients/errors.js";

const DAY_MS = 86_400_000;
/** A deadline past what a Node.js timer holds (2^31 − 1 ms, about 24.8 days). */
const THIRTY_DAYS_MS = 30 * DAY_MS;
const READ_AFTER = `/${EventLogService.typeName}/ReadAfter`;
const HEALTH_WATCH = `/${Health.typeName}/Watch`;
const ACQUIRE = `/${SessionLeaseService.typeName}/Acquire`;

/**
 * A deadline longer than a Node.js timer can hold (2^31 − 1 ms, about 24.8
 * days; the harness passes its caller's deadline through, wire-contract.md
 * section 1) sets no timer on the server: the call runs as it would without
 * one, and its client cancels it when the deadline passes. Before, grpc-js
 * (server streams, compressed requests, health on both gRPC listeners)
 * counted such a timeout in a 32-bit integer and connect-es passed it to
 * `setTimeout` as it is: a follow stream with a 30-day deadline ended
 * DEADLINE_EXCEEDED, or OK on the Connect listener, within milliseconds.
 * And a follow stream on the Connect listener whose (ordinary) deadline
 * passes ends `deadline_exceeded`, not with a clean end the client would
 * take for the stream's real end (section 3.6: a follow stays open until the
 * client cancels).
 */
describe.each(conformanceBackends())("deadlines beyond a timer's reach on $name", (backend: TestBackend) => {
  let server: ServerProcess;
  let log: grpc.Client;

  beforeAll(async () => {
    const { store, args } = await backend.setup();
    server = await startServer(["all", "--store", store, "--connect-listen", "127.0.0.1:0", "--health-listen", "127.0.0.1:0", ...args]);
    log = rawGrpcClient(EventLogService, server.address);
  });

  afterAll(async () => {
    log?.close();
    await server?.stop();
    await backend.teardown();
  });

  /** Appends one event to `sessionId` after `ms`, on a client of its own. */
  const appendLater = (sessionId: string, ms: number) =>
    new Promise<void>((resolve, reject) =>
      setTimeout(() => {
        rawUnary(log, EventLogService.method.append, { sessionId, event: { format: EVENT_FORMAT, payload: Buffer.from('{"type":"note"}') } }).then(() => resolve(), reject);
      }, ms),
    );

  test("a follow stream with a 30-day deadline on the gRPC listener stays open and delivers a later append", async () => {
    const request = toBinary(EventLogService.method.readAfter.input, create(EventLogService.method.readAfter.input, { sessionId: "far-grpc", follow: true }));
    const appended = appendLater("far-grpc", 1500);
    const outcome = await callWithBytes(log, READ_AFTER, request, { streaming: true, deadlineMs: THIRTY_DAYS_MS, endAfter: (got) => got.length >= 1 });
    await appended;
    expect({ code: outcome.code, messages: outcome.messages.length, cancelledByClient: outcome.cancelledByClient }).toEqual({ code: grpc.status.CANCELLED, messages: 1, cancelledByClient: true });
  });

  test("a follow stream with a 30-day deadline on the Connect listener stays open and delivers a later append", async () => {
    const appended = appendLater("far-connect", 1500);
    const { envelopes, ended } = await connectStream(server.connectAddress!, READ_AFTER, { sessionId: "far-connect", follow: true }, THIRTY_DAYS_MS, (got) => got.length >= 1);
    await appended;
    expect(ended).toBe(false);
    expect(envelopes).toHaveLength(1);
    expect(envelopes[0]).toMatchObject({ flags: 0, json: { kind: "event" } });
  });

  test("a follow stream on the Connect listener whose deadline passes ends deadline_exceeded, not OK", async () => {
    const started = Date.now();
    const { envelopes, ended } = await connectStream(server.connectAddress!, READ_AFTER, { sessionId: "short-connect", follow: true }, 800, () => false);
    expect(ended).toBe(true);
    expect(Date.now() - started).toBeGreaterThanOrEqual(700);
    expect(envelopes).toHaveLength(1);
    expect(envelopes[0]).toMatchObject({ flags: 2, json: { error: { code: "deadline_exceeded" } } });
  });

  test("a follow stream on the gRPC listener whose deadline passes still ends DEADLINE_EXCEEDED", async () => {
    const request = toBinary(EventLogService.method.readAfter.input, create(EventLogService.method.readAfter.input, { sessionId: "short-grpc", follow: true }));
    const outcome = await callWithBytes(log, READ_AFTER, request, { streaming: true, deadlineMs: 800 });
    expect(outcome.code).toBe(grpc.status.DEADLINE_EXCEEDED);
  });

  test("a compressed unary call (grpc-js serves it) with a 720-hour grpc-timeout is answered OK", async () => {
    const bytes = toBinary(SessionLeaseService.method.acquire.input, create(SessionLeaseService.method.acquire.input, { sessionId: "far-gzip", owner: "o" }));
    const framed = grpcFramed(gzipSync(bytes));
    framed[0] = 1;
    const got = await h2GrpcCall(server.address, ACQUIRE, framed, { "grpc-timeout": "720H", "grpc-encoding": "gzip" });
    expect({ status: got.status, message: got.message }).toEqual({ status: "0", message: "OK" });
  });

  test.each([
    ["the gRPC listener", () => server.address],
    ["--health-listen", () => server.healthAddress!],
  ])("a health Watch with a 30-day deadline on %s stays open", async (_where, address) => {
    const health = rawGrpcClient(Health, address());
    try {
      const request = toBinary(Health.method.watch.input, create(Health.method.watch.input, { service: "" }));
      const started = Date.now();
      const outcome = await callWithBytes(health, HEALTH_WATCH, request, { streaming: true, deadlineMs: THIRTY_DAYS_MS, idleMs: 1500 });
      expect(outcome.cancelledByClient).toBe(true);
      expect(outcome.messages).toHaveLength(1);
      expect(Date.now() - started).toBeGreaterThanOrEqual(1400);
    } finally {
      health.close();
    }
  });

  test("a health Watch on the Connect listener whose deadline passes ends deadline_exceeded", async () => {
    const { envelopes, ended } = await connectStream(server.connectAddress!, HEALTH_WATCH, { service: "" }, 800, () => false);
    expect(ended).toBe(true);
    expect(envelopes.at(-1)).toMatchObject({ flags: 2, json: { error: { code: "deadline_exceeded" } } });
  });

  describe("the TypeScript clients", () => {
    let clients: DriverClients;
    beforeAll(async () => {
      clients = await openDriverClients({ sessionStoreUrl: server.address, eventLogUrl: server.address });
    });
    afterAll(() => clients?.close());

    test("a Load with a 30-day deadline is answered, not failed at once as TimeoutError", async () => {
      const err = await clients.sessionStore.load("far-client", { timeoutMs: THIRTY_DAYS_MS }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(SessionNotFoundError);
    });

    test("a follow with a 30-day deadline stays open and delivers a later append", async () => {
      const stop = new AbortController();
      const appended = appendLater("far-client-follow", 1500);
      const got: string[] = [];
      for await (const record of clients.eventLog.readAfter("far-client-follow", { follow: true, timeoutMs: THIRTY_DAYS_MS, signal: stop.signal })) {
        got.push(record.kind);
        stop.abort();
      }
      await appended;
      expect(got).toEqual(["event"]);
    });
  });

  test("no timer overflow was warned of", () => {
    expect(server.stderr.filter((line) => line.includes("TimeoutOverflowWarning"))).toEqual([]);
  });
});
