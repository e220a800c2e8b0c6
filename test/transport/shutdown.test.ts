import { afterAll, describe, expect, test } from "vitest";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { Code, ConnectError } from "@connectrpc/connect";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { Health, HealthCheckResponse_ServingStatus as ServingStatus } from "../../gen/grpc/health/v1/health_pb.js";
import { startServer } from "../helpers/server.js";
import { sharedConformanceBackends, type TestBackend } from "../helpers/backends.js";
import { grpcClient, grpcClientWithSentSignal } from "../helpers/clients.js";
import { METRICS_FLAGS, rpcsInFlight } from "../helpers/metrics.js";
import { waitFor } from "../helpers/wait.js";
import { connectStream, type Envelope } from "../helpers/connect-stream.js";
import { create, toBinary } from "@bufbuild/protobuf";
import { EventLogService } from "../../gen/mecatl/driver/v1/event_log_pb.js";

/** Starts a new server on `store` and checks that the session "in-flight" holds `payload`. */
async function expectStoredAfterRestart(store: string, payload: Buffer): Promise<void> {
  const again = await startServer(["--store", store]);
  try {
    const got = await grpcClient(SessionStoreService, again.address).load({ sessionId: "in-flight" });
    expect(Buffer.from(got.snapshot!.payload).equals(payload)).toBe(true);
  } finally {
    await again.stop();
  }
}

describe("graceful shutdown on SIGTERM", () => {
  test("an in-flight Save finishes and is durable; open streams end with UNAVAILABLE; exit code 0", async () => {
    const store = `sqlite:${join(mkdtempSync(join(tmpdir(), "mecatl-shutdown-")), "db.sqlite")}`;
    const server = await startServer(["--store", store, ...METRICS_FLAGS]);
    const { client, sent } = grpcClientWithSentSignal(SessionStoreService, server.address);
    const watched: number[] = [];
    const streamEnd = (async () => {
      try {
        for await (const r of grpcClient(Health, server.address).watch({ service: "" })) watched.push(r.status);
        return "clean end";
      } catch (err) {
        return Code[ConnectError.from(err).code];
      }
    })();
    await waitFor(() => watched.length > 0, 10_000, "the Watch's first status");
    const payload = randomBytes(48 * 1024 * 1024);
    let answered = false;
    const saving = client.save({ sessionId: "in-flight", snapshot: { format: "sessnap-json/1", payload } }).finally(() => (answered = true));
    saving.catch(() => undefined);
    await sent("Save");
    // The server says its Save handler is running (not merely that the client sent it all), and the
    // client has no answer yet: the call is in flight when SIGTERM arrives.
    await waitFor(async () => (await rpcsInFlight(server.metricsAddress!, "Save")) === 1 || answered, 30_000, "the server to report the Save in flight");
    expect(answered, "the Save was answered before it was seen in flight").toBe(false);
    const exit = server.stop();
    await saving;
    expect(await exit).toBe(0);
    expect(await streamEnd).toBe("Unavailable");
    // A Watch hears NOT_SERVING before its stream ends (found by a fresh-eyes run: it ended with no word).
    expect(watched).toEqual([ServingStatus.SERVING, ServingStatus.NOT_SERVING]);
    await expectStoredAfterRestart(store, payload);
  });
});

describe.each(sharedConformanceBackends())("graceful shutdown on SIGTERM, on the Connect listener, on $name", (backend: TestBackend) => {
  afterAll(() => backend.teardown());

  test("an in-flight Save finishes and is durable; a follow and a Watch end unavailable, not with a lost socket", async () => {
    const { store, args } = await backend.setup();
    const server = await startServer(["--store", store, "--connect-listen", "127.0.0.1:0", ...args, ...METRICS_FLAGS]);
    const connectAddress = server.connectAddress!;
    const follow = connectStream(connectAddress, `/${EventLogService.typeName}/ReadAfter`, { sessionId: "followed", follow: true }, undefined, () => false);
    const watched: Envelope[] = [];
    const watch = connectStream(connectAddress, `/${Health.typeName}/Watch`, { service: "" }, undefined, (got) => (watched.splice(0, watched.length, ...got), false));
    await waitFor(() => watched.length > 0, 10_000, "the Watch's first status");
    await waitFor(async () => (await rpcsInFlight(server.metricsAddress!, "ReadAfter")) === 1, 10_000, "the follow to be open");
    const payload = randomBytes(48 * 1024 * 1024);
    const request = toBinary(SessionStoreService.method.save.input, create(SessionStoreService.method.save.input, { sessionId: "in-flight", snapshot: { format: "sessnap-json/1", payload } }));
    let answered = false;
    const saving = fetch(`http://${connectAddress}/${SessionStoreService.typeName}/Save`, { method: "POST", headers: { "content-type": "application/proto" }, body: request }).finally(() => (answered = true));
    await waitFor(async () => (await rpcsInFlight(server.metricsAddress!, "Save")) === 1 || answered, 30_000, "the server to report the Save in flight");
    expect(answered, "the Save was answered before it was seen in flight").toBe(false);
    const exit = server.stop();
    expect((await saving).status).toBe(200);
    const followed = await follow;
    expect(followed.ended).toBe(true);
    expect(followed.envelopes.at(-1)).toMatchObject({ flags: 2, json: { error: { code: "unavailable", message: expect.stringContaining("shutting down") } } });
    const watchEnd = await watch;
    expect(watchEnd.envelopes.map((e) => (e.flags === 2 ? (e.json.error as { code: string }).code : e.json.status))).toEqual(["SERVING", "NOT_SERVING", "unavailable"]);
    expect(await exit).toBe(0);
    await expectStoredAfterRestart(store, payload);
  });

  test("with every Connect call answered (an OK, an error, a follow its client closed), SIGTERM exits at once, not after --shutdown-grace", async () => {
    const { store, args } = await backend.setup();
    const server = await startServer(["--store", store, "--connect-listen", "127.0.0.1:0", "--shutdown-grace", "60s", ...args]);
    const connectAddress = server.connectAddress!;
    const unary = (service: string, method: string, body: unknown) =>
      fetch(`http://${connectAddress}/${service}/${method}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    const payload = Buffer.from("{}").toString("base64");
    expect((await unary(SessionStoreService.typeName, "Save", { sessionId: "answered", snapshot: { format: "sessnap-json/1", payload } })).status).toBe(200);
    expect((await unary(SessionStoreService.typeName, "Load", { sessionId: "never-saved" })).status).toBe(404);
    expect((await unary(EventLogService.typeName, "Append", { sessionId: "answered", event: { format: "eventlog-json/1", payload } })).status).toBe(200);
    // The follow is cancelled by its client once the appended record has come.
    const followed = await connectStream(connectAddress, `/${EventLogService.typeName}/ReadAfter`, { sessionId: "answered", follow: true }, undefined, (got) => got.length > 0);
    expect(followed.ended).toBe(false);
    const started = performance.now();
    expect(await server.stop()).toBe(0);
    // Before the fix every Connect call stayed counted as running: the exit came after the whole 60 s grace.
    expect(performance.now() - started).toBeLessThan(15_000);
    expect(server.stderr.join("\n")).not.toContain("shutdown grace elapsed");
  });
});
