import { afterAll, afterEach, beforeAll, describe, expect, test } from "vitest";
import http2 from "node:http2";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { EventLogService } from "../../gen/mecatl/driver/v1/event_log_pb.js";
import { Health } from "../../gen/grpc/health/v1/health_pb.js";
import { logEntries, startServer, type ServerProcess } from "../helpers/server.js";
import { conformanceBackends, type TestBackend } from "../helpers/backends.js";
import { makePki, type TestPki } from "../helpers/certs.js";
import { METRICS_FLAGS, metricValue, rpcsInFlight } from "../helpers/metrics.js";
import { connectStream } from "../helpers/connect-stream.js";
import { waitFor } from "../helpers/wait.js";

const FOLLOW_PATH = `/${EventLogService.typeName}/ReadAfter`;
const WATCH_PATH = `/${Health.typeName}/Watch`;

/** One Connect-protocol JSON envelope. */
function envelope(message: unknown): Buffer {
  const json = Buffer.from(JSON.stringify(message));
  const prefix = Buffer.alloc(5);
  prefix.writeUInt32BE(json.length, 1);
  return Buffer.concat([prefix, json]);
}

/** Finished calls of `method` counted with status `code` (a Code name, as the metric labels it). */
function finished(server: ServerProcess, method: string, code: string): Promise<number> {
  return metricValue(server.metricsAddress!, "mecatl_drivers_rpcs_total", { method, code });
}

/**
 * A client that closes a server stream (follow, health Watch) before it
 * ends gave up on the call: the server counts it CANCELLED and logs no error,
 * whatever HTTP/2 code the client's reset carries (wire-contract.md section
 * 1). connect-node read the code into a status of its own, so a reset with
 * INTERNAL_ERROR (what connect-node's client sends when its own deadline
 * passes) was counted and logged as an INTERNAL error of the server (found
 * by a fresh-eyes run).
 */
describe.each(conformanceBackends())("a client that closes a Connect stream, on $name", (backend: TestBackend) => {
  let pki: TestPki;
  let server: ServerProcess;
  let session: http2.ClientHttp2Session | undefined;
  beforeAll(async () => {
    pki = makePki();
    const { store } = await backend.setup();
    server = await startServer(["--store", store, "--connect-listen", "127.0.0.1:0", "--tls-cert", pki.serverCert, "--tls-key", pki.serverKey, ...METRICS_FLAGS]);
  });
  afterEach(() => {
    session?.destroy();
    session = undefined;
  });
  afterAll(async () => {
    await server?.stop();
    await backend.teardown();
  });

  /**
   * Opens `path` over HTTP/2 with `request`, waits until `open(received)` holds
   * (`received()`: bytes of answer so far), then resets the stream with `code`.
   */
  async function resetAfterOpen(path: string, request: unknown, code: number, open: (received: () => number) => Promise<boolean> | boolean): Promise<void> {
    session ??= http2.connect(`https://localhost:${server.connectAddress!.split(":")[1]}`, { ca: pki.read(pki.caCert) });
    const stream = session.request({ ":method": "POST", ":path": path, "content-type": "application/connect+json" });
    let bytes = 0;
    stream.on("data", (chunk: Buffer) => (bytes += chunk.length));
    stream.on("error", () => undefined);
    stream.end(envelope(request));
    await waitFor(() => open(() => bytes), 10_000, `${path} to be open`);
    const closed = new Promise((resolve) => stream.once("close", resolve));
    stream.close(code);
    await closed;
  }

  const RESET_CODES = ["NGHTTP2_CANCEL", "NGHTTP2_INTERNAL_ERROR", "NGHTTP2_PROTOCOL_ERROR", "NGHTTP2_REFUSED_STREAM", "NGHTTP2_ENHANCE_YOUR_CALM", "NGHTTP2_NO_ERROR"] as const;

  test.each(RESET_CODES)("a follow reset with %s ends CANCELLED, with no error logged", async (name) => {
    const logged = server.stderr.length;
    const before = { cancelled: await finished(server, "ReadAfter", "Canceled"), internal: await finished(server, "ReadAfter", "Internal") };
    await resetAfterOpen(FOLLOW_PATH, { sessionId: `reset-${name}`, follow: true }, http2.constants[name], async () => (await rpcsInFlight(server.metricsAddress!, "ReadAfter")) === 1);
    await waitFor(async () => (await rpcsInFlight(server.metricsAddress!, "ReadAfter")) === 0, 10_000, "the follow to end");
    expect(await finished(server, "ReadAfter", "Canceled")).toBe(before.cancelled + 1);
    expect(await finished(server, "ReadAfter", "Internal")).toBe(before.internal);
    expect(await metricValue(server.metricsAddress!, "mecatl_drivers_followers")).toBe(0);
    expect(logEntries(server, "internal error", logged)).toEqual([]);
  });

  test("a health Watch reset with INTERNAL_ERROR logs nothing", async () => {
    const logged = server.stderr.length;
    await resetAfterOpen(WATCH_PATH, { service: "" }, http2.constants.NGHTTP2_INTERNAL_ERROR, (received) => received() > 0);
    // A Watch is not counted in the call metrics (health.ts); what is checked is that nothing is written to stderr.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(server.stderr.slice(logged)).toEqual([]);
  });

  test("connect-node follows that end by the client's deadline or abort count no INTERNAL, and log no error", async () => {
    const logged = server.stderr.length;
    const before = (await finished(server, "ReadAfter", "Canceled")) + (await finished(server, "ReadAfter", "DeadlineExceeded"));
    const internal = await finished(server, "ReadAfter", "Internal");
    const client = createClient(EventLogService, createConnectTransport({ baseUrl: `https://localhost:${server.connectAddress!.split(":")[1]}`, httpVersion: "2", nodeOptions: { ca: pki.read(pki.caCert) } }));
    const follow = async (options: { timeoutMs?: number; signal?: AbortSignal }): Promise<Code> => {
      try {
        for await (const _ of client.readAfter({ sessionId: "by-client", follow: true }, options));
        return Code.Unknown;
      } catch (err) {
        return ConnectError.from(err).code;
      }
    };
    // Each a way connect-node's client resets with INTERNAL_ERROR (its reason is not CANCELLED).
    expect(await follow({ timeoutMs: 300 })).toBe(Code.DeadlineExceeded);
    expect(await follow({ signal: AbortSignal.timeout(300) })).toBe(Code.Canceled);
    const aborting = new AbortController();
    setTimeout(() => aborting.abort(new ConnectError("gave up", Code.Unavailable)), 300);
    expect(await follow({ signal: aborting.signal })).toBe(Code.Unavailable);
    await waitFor(async () => (await rpcsInFlight(server.metricsAddress!, "ReadAfter")) === 0, 10_000, "the follows to end");
    // The first may end by the server's own deadline (the same 300 ms) before the client's reset arrives.
    expect((await finished(server, "ReadAfter", "Canceled")) + (await finished(server, "ReadAfter", "DeadlineExceeded"))).toBe(before + 3);
    expect(await finished(server, "ReadAfter", "Internal")).toBe(internal);
    expect(logEntries(server, "internal error", logged)).toEqual([]);
  });
});

/** The same over HTTP/1.1 (the cleartext Connect listener): a closed connection is the client's cancel. */
describe("a client that closes a Connect stream over HTTP/1.1", () => {
  test("ends the follow CANCELLED, with no error logged", async () => {
    const server = await startServer(["--store", "sqlite::memory:", "--connect-listen", "127.0.0.1:0", ...METRICS_FLAGS]);
    try {
      const appended = await fetch(`http://${server.connectAddress!}/${EventLogService.typeName}/Append`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ sessionId: "h1", event: { format: "eventlog-json/1", payload: Buffer.from("{}").toString("base64") } }),
      });
      expect(appended.status).toBe(200);
      // The client aborts its fetch once the first record arrives: the follow is open and live when its connection closes.
      const { envelopes, ended } = await connectStream(server.connectAddress!, FOLLOW_PATH, { sessionId: "h1", follow: true }, undefined, (got) => got.length >= 1);
      expect([envelopes.length, ended]).toEqual([1, false]);
      await waitFor(async () => (await rpcsInFlight(server.metricsAddress!, "ReadAfter")) === 0, 10_000, "the follow to end");
      expect(await finished(server, "ReadAfter", "Canceled")).toBe(1);
      expect(await finished(server, "ReadAfter", "Internal")).toBe(0);
      expect(logEntries(server, "internal error")).toEqual([]);
    } finally {
      await server.stop();
    }
  });
});
