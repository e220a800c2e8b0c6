import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { connect, constants, type ClientHttp2Session, type ClientHttp2Stream } from "node:http2";
import { request as httpsRequest } from "node:https";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { create, toBinary } from "@bufbuild/protobuf";
import { LoadRequestSchema, SaveRequestSchema, SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { Health, HealthCheckResponse_ServingStatus } from "../../gen/grpc/health/v1/health_pb.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { MAX_MESSAGE_BYTES } from "../helpers/clients.js";
import { makePki, type TestPki } from "../helpers/certs.js";
import { expectCode } from "../helpers/errors.js";
import { metricValue } from "../helpers/metrics.js";
import { waitFor } from "../helpers/wait.js";

const MiB = 1024 * 1024;
const SAVE_PATH = `/${SessionStoreService.typeName}/Save`;
const saveBody = (sessionId: string, bytes: number) =>
  Buffer.from(toBinary(SaveRequestSchema, create(SaveRequestSchema, { sessionId, snapshot: { format: "sessnap-json/1", payload: Buffer.alloc(bytes, 0x61) } })));

/** What the server answered to a request body sent piece by piece, and how much of the body had been sent by then. */
interface Refusal {
  status: number;
  body: Record<string, unknown>;
  sentBytes: number;
}

/**
 * Sends `body` 64 KiB at a time through `out`, each piece only once the
 * previous one was taken (so the server's reading paces the sending), and
 * stops as soon as the answer has arrived.
 */
async function sendUntilAnswered(out: NodeJS.WritableStream, answered: Promise<unknown>, body: Buffer): Promise<number> {
  let done = false;
  void answered.finally(() => (done = true));
  let sent = 0;
  while (!done && sent < body.length) {
    const piece = body.subarray(sent, sent + 64 * 1024);
    sent += piece.length;
    if (!out.write(piece)) await Promise.race([new Promise((resolve) => out.once("drain", resolve)), answered]);
  }
  if (!done) out.end();
  return sent;
}

/** Resolves with `promise`, or rejects naming `what` after `ms` (a bound on a hang, not a timing). */
function withinMs<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms)));
  return Promise.race([promise, expired]).finally(() => clearTimeout(timer));
}

/**
 * Issue 10 deliverable 3 on the Connect listener: request bytes are charged
 * as they arrive when the request declares no `content-length` (HTTP/2,
 * chunked HTTP/1.1), and answer bytes while they are written, against the
 * same --max-inflight-bytes as the gRPC listener (each byte three times:
 * 48 MB holds one call of 16 MiB, or one 10 MiB answer but not two).
 * The listener uses TLS: only there does it speak HTTP/2.
 */
describe("the memory budget for bytes in flight on the Connect listener (--max-inflight-bytes 48MB)", () => {
  let server: ServerProcess;
  let pki: TestPki;
  let h2: ClientHttp2Session;
  let baseUrl: string;
  const inflight = () => metricValue(server.metricsAddress!, "mecatl_drivers_inflight_bytes");
  /** A Connect client over HTTP/2 without compression (a compressed answer of 'a's would be charged at its compressed size). */
  const client = () =>
    createClient(
      SessionStoreService,
      createConnectTransport({ baseUrl, httpVersion: "2", acceptCompression: [], readMaxBytes: MAX_MESSAGE_BYTES, writeMaxBytes: MAX_MESSAGE_BYTES, nodeOptions: { ca: pki.read(pki.caCert) } }),
    );
  /** A Connect unary Load on the shared HTTP/2 connection, read as it arrives unless its stream is paused. */
  const rawLoad = (sessionId: string) => {
    const stream: ClientHttp2Stream = h2.request({ ":method": "POST", ":path": `/${SessionStoreService.typeName}/Load`, "content-type": "application/proto" });
    stream.on("error", () => undefined);
    stream.end(Buffer.from(toBinary(LoadRequestSchema, create(LoadRequestSchema, { sessionId }))));
    const answer = new Promise<{ status: number; bytes: number }>((resolve) => {
      let status = 0;
      let bytes = 0;
      stream.once("response", (h) => (status = Number(h[":status"])));
      stream.on("data", (c: Buffer) => (bytes += c.length));
      stream.once("end", () => resolve({ status, bytes }));
    });
    return { stream, answer };
  };
  beforeAll(async () => {
    pki = makePki();
    server = await startServer([
      "session-store",
      "--store",
      "sqlite::memory:",
      "--max-inflight-bytes",
      "48MB",
      "--request-idle-timeout",
      "2s",
      "--metrics-listen",
      "127.0.0.1:0",
      "--connect-listen",
      "127.0.0.1:0",
      "--tls-cert",
      pki.serverCert,
      "--tls-key",
      pki.serverKey,
    ]);
    baseUrl = `https://localhost:${server.connectAddress!.split(":")[1]}`;
    h2 = connect(baseUrl, { ca: pki.read(pki.caCert) });
  });
  afterAll(async () => {
    h2?.close();
    await server?.stop();
  });

  test("an HTTP/2 request of unknown length beyond the budget is refused as it arrives, before the server has read it all", async () => {
    const body = saveBody("h2-huge", 20 * MiB);
    const stream = h2.request({ ":method": "POST", ":path": SAVE_PATH, "content-type": "application/proto" });
    stream.on("error", () => undefined);
    const answered = new Promise<Refusal>((resolve) => {
      stream.once("response", (headers) => {
        const chunks: Buffer[] = [];
        stream.on("data", (c: Buffer) => chunks.push(c));
        stream.once("end", () => resolve({ status: Number(headers[":status"]), body: JSON.parse(Buffer.concat(chunks).toString()) as Record<string, unknown>, sentBytes: 0 }));
      });
    });
    const sentBytes = await sendUntilAnswered(stream, answered, body);
    const refusal = await answered;
    expect(refusal.status).toBe(429);
    expect(refusal.body).toMatchObject({ code: "resource_exhausted", message: expect.stringMatching(/request of at least \d+ bytes.*--max-inflight-bytes/) });
    // The server stopped reading at its share of the budget (16 MiB); HTTP/2 flow control held the rest back.
    expect(sentBytes).toBeLessThan(18 * MiB);
    // The client sends no more and does not end its body: after its answer the server reads and drops what comes, and once
    // nothing came for --request-idle-timeout (2s here) it resets the stream with NO_ERROR (discard-unread-body.ts).
    await withinMs(10_000, "the server to close the refused request's stream", new Promise((resolve) => (stream.closed ? resolve(undefined) : stream.once("close", resolve))));
    expect(stream.rstCode).toBe(constants.NGHTTP2_NO_ERROR);
    await waitFor(async () => (await inflight()) === 0, 10_000, "the refused request's bytes to be given back");
    await expectCode(client().load({ sessionId: "h2-huge" }), Code.NotFound);
  });

  test.each([
    ["gRPC", createGrpcTransport],
    ["Connect", createConnectTransport],
    ["gRPC-Web", createGrpcWebTransport],
  ] as const)("a connect-node %s client still sending a refused request over HTTP/2 reads its RESOURCE_EXHAUSTED (was 'Premature close')", async (_name, transport) => {
    const c = createClient(SessionStoreService, transport({ baseUrl, httpVersion: "2", writeMaxBytes: MAX_MESSAGE_BYTES, nodeOptions: { ca: pki.read(pki.caCert) } }));
    const err = await c.save({ sessionId: "refused-mid-send", snapshot: { format: "sessnap-json/1", payload: Buffer.alloc(20 * MiB, 0x61) } }).catch((e: unknown) => e);
    expect(ConnectError.from(err).code).toBe(Code.ResourceExhausted);
    expect(ConnectError.from(err).rawMessage).toMatch(/request of at least \d+ bytes.*--max-inflight-bytes/);
    await waitFor(async () => (await inflight()) === 0, 10_000, "the refused request's bytes to be given back");
    await expectCode(client().load({ sessionId: "refused-mid-send" }), Code.NotFound);
  });

  test.each([
    ["Connect", createConnectTransport],
    ["gRPC-Web", createGrpcWebTransport],
  ] as const)("a connect-node %s client over HTTP/1.1 gets its next answer on the connection it kept alive after a refusal mid-body (it hung)", async (_name, transport) => {
    const c = createClient(SessionStoreService, transport({ baseUrl, httpVersion: "1.1", writeMaxBytes: MAX_MESSAGE_BYTES, nodeOptions: { ca: pki.read(pki.caCert) } }));
    // 18 MiB: refused after about 16.5 MiB, so the rest fits in the sockets' buffers and the client sends it all, then
    // reuses the connection (with much more left, it opens another one for its next call).
    for (const round of [1, 2, 3]) {
      const err = await c.save({ sessionId: "h1-refused", snapshot: { format: "sessnap-json/1", payload: Buffer.alloc(18 * MiB, 0x61) } }).catch((e: unknown) => e);
      expect(ConnectError.from(err).code).toBe(Code.ResourceExhausted);
      // The next call goes out on the same keep-alive connection, after the rest of the refused body: the server must read
      // and drop that body to reach it (before, it read nothing more and the call waited until the connection timed out).
      await c.save({ sessionId: `h1-after-refusal-${round}`, snapshot: { format: "sessnap-json/1", payload: Buffer.from("{}") } }, { timeoutMs: 4_000 });
    }
    expect((await client().load({ sessionId: "h1-after-refusal-3" })).snapshot?.payload).toEqual(new Uint8Array(Buffer.from("{}")));
    await expectCode(client().load({ sessionId: "h1-refused" }), Code.NotFound);
    await waitFor(async () => (await inflight()) === 0, 10_000, "the refused requests' bytes to be given back");
  });

  test("a chunked HTTP/1.1 request beyond the budget is refused as it arrives", async () => {
    const req = httpsRequest(`${baseUrl}${SAVE_PATH}`, { method: "POST", headers: { "content-type": "application/proto" }, ca: pki.read(pki.caCert) });
    req.on("error", () => undefined);
    const answered = new Promise<Refusal>((resolve) => {
      req.once("response", (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.once("end", () => resolve({ status: res.statusCode!, body: JSON.parse(Buffer.concat(chunks).toString()) as Record<string, unknown>, sentBytes: 0 }));
      });
    });
    await sendUntilAnswered(req, answered, saveBody("h1-huge", 20 * MiB));
    const refusal = await answered;
    expect(req.getHeader("content-length")).toBeUndefined();
    expect(refusal.status).toBe(429);
    expect(refusal.body).toMatchObject({ code: "resource_exhausted", message: expect.stringContaining("--max-inflight-bytes") });
    req.destroy();
    await waitFor(async () => (await inflight()) === 0, 10_000, "the refused request's bytes to be given back");
    await expectCode(client().load({ sessionId: "h1-huge" }), Code.NotFound);
  });

  test("a request asking Expect: 100-continue that does not fit is refused before it sends its body, and its connection closed; one that fits is told to continue", async () => {
    const send = (body: Buffer) =>
      new Promise<{ continued: boolean; status: number; connection: string | undefined }>((resolve, reject) => {
        const headers = { "content-type": "application/proto", "content-length": String(body.length), expect: "100-continue" };
        const req = httpsRequest(`${baseUrl}${SAVE_PATH}`, { method: "POST", headers, ca: pki.read(pki.caCert), agent: false });
        let continued = false;
        req.on("continue", () => {
          continued = true;
          req.end(body);
        });
        req.on("response", (res) => {
          res.resume();
          res.once("end", () => {
            resolve({ continued, status: res.statusCode!, connection: res.headers.connection });
            req.destroy();
          });
        });
        req.on("error", reject);
      });
    // 20 MiB needs 60 MiB of the 48 MB budget: refused from its headers. Before, Node told it to continue first.
    expect(await send(saveBody("expect-refused", 20 * MiB))).toEqual({ continued: false, status: 429, connection: "close" });
    expect(await send(saveBody("expect-served", MiB))).toMatchObject({ continued: true, status: 200 });
    expect((await client().load({ sessionId: "expect-served" })).snapshot?.payload.length).toBe(MiB);
    await expectCode(client().load({ sessionId: "expect-refused" }), Code.NotFound);
  });

  test("a request of unknown length within the budget is served", async () => {
    const stream = h2.request({ ":method": "POST", ":path": SAVE_PATH, "content-type": "application/proto" });
    const status = new Promise<number>((resolve) => stream.once("response", (h) => resolve(Number(h[":status"]))));
    stream.resume();
    await sendUntilAnswered(stream, new Promise(() => undefined), saveBody("h2-fits", 12 * MiB));
    expect(await status).toBe(200);
    expect((await client().load({ sessionId: "h2-fits" })).snapshot?.payload.length).toBe(12 * MiB);
    await waitFor(async () => (await inflight()) === 0, 10_000, "the budget to be given back");
  });

  test("an answer is charged until it is written: a second 10 MiB Load waits, then gets RESOURCE_EXHAUSTED; once the first is gone it is served", async () => {
    await client().save({ sessionId: "big", snapshot: { format: "sessnap-json/1", payload: Buffer.alloc(10 * MiB, 0x62) } });
    await waitFor(async () => (await inflight()) === 0, 10_000, "the Save's bytes to be given back");
    // A Load whose answer the client does not read: HTTP/2 flow control keeps it on the server.
    const unread = rawLoad("big");
    unread.stream.pause();
    await waitFor(async () => (await inflight()) >= 30 * MiB, 10_000, "the unread answer's bytes to be taken from the budget");

    const err = await expectCode(client().load({ sessionId: "big" }), Code.ResourceExhausted);
    expect(err.rawMessage).toMatch(/budget.*full.*answer/);
    // Health is not charged (as on the gRPC listener): a probe answers at once while the budget is too full for a large call.
    const health = createClient(Health, createConnectTransport({ baseUrl, httpVersion: "2", nodeOptions: { ca: pki.read(pki.caCert) } }));
    const probed = performance.now();
    expect((await health.check({ service: "" }, { timeoutMs: 5_000 })).status).toBe(HealthCheckResponse_ServingStatus.SERVING);
    expect(performance.now() - probed).toBeLessThan(1_000);

    // On the same HTTP/2 connection as the unread answer (Node's own 10 MiB per-connection limit would refuse it at once).
    const waiting = rawLoad("big");
    unread.stream.close();
    expect(await waiting.answer).toMatchObject({ status: 200 });
    expect((await waiting.answer).bytes).toBeGreaterThan(10 * MiB);
    await waitFor(async () => (await inflight()) === 0, 10_000, "the budget to be given back");
  });
});
