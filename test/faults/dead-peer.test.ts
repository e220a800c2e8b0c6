import { afterEach, describe, expect, test } from "vitest";
import * as grpc from "@grpc/grpc-js";
import { Code, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { EventLogService } from "../../gen/mecatl/driver/v1/event_log_pb.js";
import { startServer, waitForLog, type ServerProcess } from "../helpers/server.js";
import { grpcClient } from "../helpers/clients.js";
import { rawGrpcClient } from "../helpers/raw-grpc.js";
import { startFaultProxy, type FaultProxy } from "../helpers/fault-proxy.js";
import { allBackends } from "../helpers/backends.js";
import { appendSeqs, expectReason, openFollow, readAfterAll } from "../helpers/event-log.js";
import { metricValue, rpcsInFlight } from "../helpers/metrics.js";
import { waitFor } from "../helpers/wait.js";
import { makePki, type TestPki } from "../helpers/certs.js";

/** Keepalive 500 ms + timeout 2 s (a shorter timeout can drop a live but starved client on a loaded CI machine). */
const KEEPALIVE_FLAGS = ["--keepalive-time", "500ms", "--keepalive-timeout", "2s"];

/**
 * Issue 9 deliverable 4: a client that vanishes without closing its
 * connection (NAT timeout, host power loss; here a proxy that black-holes
 * every byte and never closes) must not keep its follow slots. Server
 * keepalive pings go unanswered, the connection is dropped after
 * --keepalive-time + --keepalive-timeout, and its streams end: on the gRPC
 * listener (grpc-js) and on the Connect listener's HTTP/2 connections
 * (connect-keepalive.ts).
 */
describe.each(allBackends())("a dead peer's follow streams ($name)", (backend) => {
  let pki: TestPki | undefined;
  let server: ServerProcess | undefined;
  let proxy: FaultProxy | undefined;
  let halfOpen: grpc.Client | undefined;
  afterEach(async () => {
    halfOpen?.close();
    await proxy?.close();
    await server?.stop();
    await backend.teardown();
  });

  test("free their --max-followers slots within keepalive time plus timeout", async () => {
    const { store } = await backend.setup();
    server = await startServer([
      "event-log",
      "--store",
      store,
      "--max-followers",
      "5",
      ...KEEPALIVE_FLAGS,
      "--metrics-listen",
      "127.0.0.1:0",
    ]);
    const followers = () => metricValue(server!.metricsAddress!, "mecatl_drivers_followers");
    const direct = grpcClient(EventLogService, server.address);
    await appendSeqs(direct, "s", [0]);

    // Five follows through the proxy, from a plain grpc-js client that sends no keepalive of its own.
    proxy = await startFaultProxy(Number(server.address.split(":")[1]));
    halfOpen = rawGrpcClient(EventLogService, proxy.address);
    const calls = Array.from({ length: 5 }, () => {
      const call = halfOpen!.makeServerStreamRequest(
        `/${EventLogService.typeName}/ReadAfter`,
        (b: Buffer) => b,
        (b: Buffer) => b,
        Buffer.from([0x0a, 0x01, 0x73, 0x20, 0x01]), // session_id "s", follow true
      );
      call.on("data", () => undefined);
      call.on("error", () => undefined);
      return call;
    });
    await waitFor(async () => (await followers()) === 5, 10_000, "five followers through the proxy");
    expect(await rpcsInFlight(server.metricsAddress!, "ReadAfter")).toBe(5);
    await expectReason(readAfterAll(direct, { sessionId: "s", follow: true }), Code.ResourceExhausted, "follow_capacity");

    proxy.setMode("blackhole");
    // The bound leaves room for a loaded machine.
    await waitFor(async () => (await followers()) === 0, 10_000, "the dead peer's followers to be released");
    await waitFor(async () => (await rpcsInFlight(server!.metricsAddress!, "ReadAfter")) === 0, 10_000, "their calls to leave mecatl_drivers_rpcs_in_flight");
    const fresh = openFollow(direct, { sessionId: "s" });
    expect((await fresh.next()).kind).toBe("event");
    expect(await followers()).toBe(1);
    await fresh.cancel();
    for (const call of calls) call.cancel();
  });

  test("on the Connect listener (HTTP/2 over TLS) free their slots within keepalive time plus timeout", async () => {
    const { store } = await backend.setup();
    pki ??= makePki();
    server = await startServer(["event-log", "--store", store, "--max-followers", "5", ...KEEPALIVE_FLAGS, "--metrics-listen", "127.0.0.1:0", "--connect-listen", "127.0.0.1:0", "--tls-cert", pki.serverCert, "--tls-key", pki.serverKey]);
    const followers = () => metricValue(server!.metricsAddress!, "mecatl_drivers_followers");
    const connectPort = Number(server.connectAddress!.split(":")[1]);
    // connect-node's HTTP/2 client sends no ping of its own (its default); one session carries all its calls.
    const connectClient = (port: number) =>
      createClient(EventLogService, createConnectTransport({ baseUrl: `https://localhost:${port}`, httpVersion: "2", nodeOptions: { ca: pki!.read(pki!.caCert) } }));
    const direct = connectClient(connectPort);
    await appendSeqs(direct, "s", [0]);

    proxy = await startFaultProxy(connectPort);
    const viaProxy = connectClient(proxy.port);
    const follows = Array.from({ length: 5 }, () => openFollow(viaProxy, { sessionId: "s" }));
    for (const f of follows) expect((await f.next()).kind).toBe("event");
    expect(await followers()).toBe(5);
    await expectReason(readAfterAll(direct, { sessionId: "s", follow: true }), Code.ResourceExhausted, "follow_capacity");

    const logged = server.stderr.length;
    proxy.setMode("blackhole");
    const blackholed = Date.now();
    await waitFor(async () => (await followers()) === 0, 10_000, "the dead peer's followers to be released");
    const releasedMs = Date.now() - blackholed;
    await waitFor(async () => (await rpcsInFlight(server!.metricsAddress!, "ReadAfter")) === 0, 10_000, "their calls to leave mecatl_drivers_rpcs_in_flight");
    await waitForLog(server, "closed a Connect connection: its keepalive ping went unanswered", { from: logged });
    const fresh = openFollow(direct, { sessionId: "s" });
    expect((await fresh.next()).kind).toBe("event");
    expect(await followers()).toBe(1);
    // Keepalive 500 ms + timeout 2 s; what is over is the load of the machine (printed for the record).
    console.log(`Connect follow slots of a dead peer freed ${releasedMs} ms after it went silent`);
    await fresh.cancel();
    for (const f of follows) void f.cancel();
  });
});
