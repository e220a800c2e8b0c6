import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { readFileSync } from "node:fs";
import { gzipSync } from "node:zlib";
import { connect, type ClientHttp2Session } from "node:http2";
import { request } from "node:http";
import { Code } from "@connectrpc/connect";
import { create, toBinary } from "@bufbuild/protobuf";
import { SaveRequestSchema, SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { Health, HealthCheckResponse_ServingStatus as ServingStatus } from "../../gen/grpc/health/v1/health_pb.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { grpcClient, HARNESS_MESSAGE_BYTES } from "../helpers/clients.js";
import { MIN_DEFAULT_INFLIGHT_BYTES } from "../../services/server/inflight-default.js";
import { MAX_MESSAGE_BYTES } from "../../services/server/server.js";
import { expectCode } from "../helpers/errors.js";
import { metricValue } from "../helpers/metrics.js";
import { waitFor } from "../helpers/wait.js";
import { answerOf, startCall, startSave, unfinishedSave } from "../helpers/unfinished-request.js";
import { grpcFramed, grpcPrefix, h2GrpcCall } from "../helpers/h2-grpc-call.js";

const MiB = 1024 * 1024;
const snapshot = (bytes: number) => ({ format: "sessnap-json/1", payload: Buffer.alloc(bytes, 0x61) });
/** `message` gzip-compressed as one gRPC message: flag 1, its compressed length, the compressed bytes. */
function gzipFramedMessage(message: Uint8Array): Buffer {
  const packed = gzipSync(message);
  const prefix = grpcPrefix(packed.length);
  prefix[0] = 1;
  return Buffer.concat([prefix, packed]);
}

/**
 * Registers hooks that start `session-store` on an in-memory SQLite store
 * with metrics and `flags`, and open an HTTP/2 session to it; `use` gets
 * both once they are up. Stopped and closed after the block.
 */
function serveOverH2(flags: string[], use: (server: ServerProcess, h2: ClientHttp2Session) => void): void {
  let server: ServerProcess | undefined;
  let h2: ClientHttp2Session | undefined;
  beforeAll(async () => {
    server = await startServer(["session-store", "--store", "sqlite::memory:", "--metrics-listen", "127.0.0.1:0", ...flags]);
    h2 = connect(`http://${server.address}`);
    use(server, h2);
  });
  afterAll(async () => {
    h2?.close();
    await server?.stop();
  });
}

/**
 * Issue 10 deliverable 3: request and answer bytes in flight share one
 * budget (--max-inflight-bytes); calls beyond it wait briefly, then get
 * RESOURCE_EXHAUSTED. A request's bytes count from its length prefix, before
 * the rest of its body is read; every message byte is charged three times
 * (the copies the server may hold), so 48 MB holds one 12 MiB request (36 MiB)
 * but not another 8 MiB one (24 MiB) or a 6 MiB answer (18 MiB) beside it.
 */
describe("the memory budget for bytes in flight (--max-inflight-bytes 48MB)", () => {
  let server: ServerProcess;
  let h2: ClientHttp2Session;
  const inflight = () => metricValue(server.metricsAddress!, "mecatl_drivers_inflight_bytes");
  serveOverH2(["--max-inflight-bytes", "48MB", "--connect-listen", "127.0.0.1:0"], (s, h) => {
    server = s;
    h2 = h;
  });

  /** Starts a Save whose length prefix announces `bytes` and sends only the first kilobyte of it. */
  const stalledSave = (bytes: number) => startSave(h2, bytes, 1024);

  test("a request over the message limit is refused by the limit, not the budget, and takes nothing from it", async () => {
    expect(await unfinishedSave(h2)).toEqual({ status: String(Code.ResourceExhausted), message: `Received message larger than max (${MAX_MESSAGE_BYTES + 1} vs ${MAX_MESSAGE_BYTES})`, rstCode: 0 });
    expect(await inflight()).toBe(0);
  });

  test("a request larger than the whole budget is refused at once", async () => {
    const err = await expectCode(grpcClient(SessionStoreService, server.address).save({ sessionId: "huge", snapshot: snapshot(20 * MiB) }), Code.ResourceExhausted);
    expect(err.rawMessage).toContain("--max-inflight-bytes");
  });

  test("calls beyond the budget wait, then get RESOURCE_EXHAUSTED; freed bytes admit them again", async () => {
    const client = grpcClient(SessionStoreService, server.address);
    const stalled = stalledSave(12 * MiB);
    await waitFor(async () => (await inflight()) >= 36 * MiB, 10_000, "the stalled request's bytes to be taken from the budget");

    const err = await expectCode(client.save({ sessionId: "beyond", snapshot: snapshot(8 * MiB) }), Code.ResourceExhausted);
    expect(err.rawMessage).toMatch(/budget.*full.*--max-inflight-bytes/);
    // Nothing was stored by the refused call; small calls still pass.
    await expectCode(client.load({ sessionId: "beyond" }), Code.NotFound);

    const waiting = client.save({ sessionId: "after", snapshot: snapshot(8 * MiB) });
    stalled.close();
    await waiting;
    expect((await client.load({ sessionId: "after" })).snapshot?.payload.length).toBe(8 * MiB);
    await waitFor(async () => (await inflight()) === 0, 10_000, "the budget to be given back");
  });

  test("a small request arriving while the budget is full waits for room before its method runs: refused unrun, or run once room comes (direct path and grpc-js's)", async () => {
    const client = grpcClient(SessionStoreService, server.address);
    const saveOf = (sessionId: string) => toBinary(SaveRequestSchema, create(SaveRequestSchema, { sessionId, snapshot: snapshot(1000) }));
    const path = `/${SessionStoreService.typeName}/Save`;
    // A request announcing a third of the budget (all of it, at 3 copies) and sending 1 KiB: the budget is full.
    const stalled = stalledSave(16 * MiB - 5);
    await waitFor(async () => (await inflight()) === 48 * MiB, 10_000, "the stalled request to take the whole budget");
    // A 1 KB Save arrives in one HTTP/2 frame, whole before its wait can pause it. Before, its method ran at once
    // (answered OK without budget), and with a store slower than the wait it was stored, then refused "retry later".
    for (const [name, body, headers] of [
      ["direct", grpcFramed(saveOf("gated-direct")), {}],
      ["grpc-js", gzipFramedMessage(saveOf("gated-grpc-js")), { "grpc-encoding": "gzip" }],
    ] as const) {
      const answer = await h2GrpcCall(server.address, path, body, headers);
      expect(answer.status, name).toBe(String(Code.ResourceExhausted));
      expect(answer.message, name).toMatch(/budget.*full/);
    }
    // One that gets room within the wait runs then, once.
    const waiting = h2GrpcCall(server.address, path, grpcFramed(saveOf("gated-later")));
    setTimeout(() => stalled.close(), 500);
    expect((await waiting).status).toBe("0");
    expect((await client.load({ sessionId: "gated-later" })).snapshot?.payload.length).toBe(1000);
    // The refused ones never ran.
    await expectCode(client.load({ sessionId: "gated-direct" }), Code.NotFound);
    await expectCode(client.load({ sessionId: "gated-grpc-js" }), Code.NotFound);
    await waitFor(async () => (await inflight()) === 0, 10_000, "the budget to be given back");
  });

  test("on the Connect listener a request's declared content-length is taken from the budget before its body is read", async () => {
    const body = toBinary(SaveRequestSchema, create(SaveRequestSchema, { sessionId: "connect-huge", snapshot: snapshot(20 * MiB) }));
    const res = await fetch(`http://${server.connectAddress}/${SessionStoreService.typeName}/Save`, { method: "POST", headers: { "content-type": "application/proto" }, body });
    expect(res.status).toBe(429);
    // The whole declared length at once (a body of unknown length is refused as "at least" what arrived).
    expect(await res.json()).toMatchObject({ code: "resource_exhausted", message: expect.stringContaining(`this request of ${body.length} bytes needs`) });
    await expectCode(grpcClient(SessionStoreService, server.address).load({ sessionId: "connect-huge" }), Code.NotFound);
  });

  test("an answer that does not fit is RESOURCE_EXHAUSTED", async () => {
    const client = grpcClient(SessionStoreService, server.address);
    await client.save({ sessionId: "answer", snapshot: snapshot(6 * MiB) });
    const stalled = stalledSave(12 * MiB);
    await waitFor(async () => (await inflight()) >= 36 * MiB, 10_000, "the stalled request's bytes to be taken from the budget");
    const err = await expectCode(client.load({ sessionId: "answer" }), Code.ResourceExhausted);
    expect(err.rawMessage).toContain("answer");
    stalled.close();
    await waitFor(async () => (await inflight()) === 0, 10_000, "the budget to be given back");
    expect((await client.load({ sessionId: "answer" })).snapshot?.payload.length).toBe(6 * MiB);
  });
});

/**
 * The floor of the default --max-inflight-bytes (services/server/inflight-default.ts;
 * issue 10 deliverable 3): on a host whose memory makes a quarter of it less than the
 * floor, the budget is the floor (test/unit/inflight-default.test.ts), and the floor admits the largest Save the contract
 * allows and its Load (each charged three times), one after the other.
 */
describe(`the default budget's floor (--max-inflight-bytes ${MIN_DEFAULT_INFLIGHT_BYTES}) admits a maximum-size Save and its Load`, () => {
  /** The largest payload Save accepts: its Load answer is exactly the harness's 64 MiB (5 + 16 + 5 bytes of envelope). */
  const LARGEST_PAYLOAD = HARNESS_MESSAGE_BYTES - 26;
  let server: ServerProcess;
  beforeAll(async () => {
    server = await startServer(["session-store", "--store", "sqlite::memory:", "--max-inflight-bytes", String(MIN_DEFAULT_INFLIGHT_BYTES), "--metrics-listen", "127.0.0.1:0"]);
  });
  afterAll(() => server?.stop());

  test("the largest Save and its Load are answered; one byte more is the contract's INVALID_ARGUMENT, not the budget's RESOURCE_EXHAUSTED", async () => {
    const client = grpcClient(SessionStoreService, server.address);
    await client.save({ sessionId: "largest", snapshot: snapshot(LARGEST_PAYLOAD) });
    const loaded = await client.load({ sessionId: "largest" });
    expect(loaded.snapshot?.payload.length).toBe(LARGEST_PAYLOAD);
    await expectCode(client.save({ sessionId: "too-large", snapshot: snapshot(LARGEST_PAYLOAD + 1) }), Code.InvalidArgument, "snapshot.payload");
    await waitFor(async () => (await metricValue(server.metricsAddress!, "mecatl_drivers_inflight_bytes")) === 0, 10_000, "the budget to be given back");
  });
});

/**
 * A request refused before its body was read whole (here: its prefix
 * announces more than the message limit, which grpc-js refuses
 * RESOURCE_EXHAUSTED) gives its budget back when its answer is written, not
 * when the client closes the stream: a client that keeps its connection and
 * the stream open must not hold the server's budget (fresh-eyes run of
 * 2026-12-06: three such Saves on one connection held 415 MB until the
 * connection closed, and a later 20 MiB Save was refused). The server then
 * resets the stream (NO_ERROR, RFC 9113 section 8.1) so the client stops
 * sending the rest.
 */
describe("a request over the message limit on a connection kept open (--max-inflight-bytes 450MB)", () => {
  let server: ServerProcess;
  let h2: ClientHttp2Session;
  serveOverH2(["--max-inflight-bytes", "450MB"], (s, h) => {
    server = s;
    h2 = h;
  });

  test("is refused RESOURCE_EXHAUSTED and its stream reset NO_ERROR, as is one whose deadline passes mid-body; their budget is given back and a large Save then fits", async () => {
    for (let i = 0; i < 3; i++) {
      expect(await unfinishedSave(h2)).toEqual({ status: String(Code.ResourceExhausted), message: `Received message larger than max (${MAX_MESSAGE_BYTES + 1} vs ${MAX_MESSAGE_BYTES})`, rstCode: 0 });
    }
    // Taken from the budget, then answered before its body arrived: its deadline passes.
    expect(await unfinishedSave(h2, 20 * MiB, { "grpc-timeout": "300m" })).toEqual({ status: String(Code.DeadlineExceeded), message: "Deadline exceeded", rstCode: 0 });
    // The same on grpc-js's path (a call naming a compression; plain unary calls are served by grpc-direct-unary.ts).
    expect(await unfinishedSave(h2, MAX_MESSAGE_BYTES + 1, { "grpc-encoding": "gzip" })).toEqual({ status: String(Code.ResourceExhausted), message: `Received message larger than max (${MAX_MESSAGE_BYTES + 1} vs ${MAX_MESSAGE_BYTES})`, rstCode: 0 });
    expect(await unfinishedSave(h2, 20 * MiB, { "grpc-timeout": "300m", "grpc-encoding": "gzip" })).toEqual({ status: String(Code.DeadlineExceeded), message: "Deadline exceeded", rstCode: 0 });
    expect(h2.closed).toBe(false);
    await waitFor(async () => (await metricValue(server.metricsAddress!, "mecatl_drivers_inflight_bytes")) === 0, 10_000, "the budget to be given back");
    const client = grpcClient(SessionStoreService, server.address);
    await client.save({ sessionId: "after-oversize", snapshot: snapshot(40 * MiB) });
    expect((await client.load({ sessionId: "after-oversize" })).snapshot?.payload.length).toBe(40 * MiB);
  });
});

/**
 * The server process's usable address space in bytes: its mappings in
 * /proc/<pid>/maps that may be read or written, resident or not. Mappings
 * reserved with no access at all are left out: Node reserves 10 GiB so, once,
 * when its module loader first instantiates its WebAssembly lexer.
 */
function addressSpace(server: ServerProcess): number {
  let bytes = 0;
  for (const line of readFileSync(`/proc/${server.proc.pid}/maps`, "utf8").split("\n")) {
    const [range, perms] = line.split(" ");
    if (range === undefined || perms === undefined || perms.startsWith("---")) continue;
    const [from, to] = range.split("-").map((hex) => parseInt(hex, 16));
    bytes += to! - from!;
  }
  return bytes;
}

describe("a request's memory is reserved only once the budget holds it (--max-inflight-bytes 6GB)", () => {
  let server: ServerProcess;
  let h2: ClientHttp2Session;
  serveOverH2(["--max-inflight-bytes", "6GB"], (s, h) => {
    server = s;
    h2 = h;
  });

  test("40 Saves that announce 40 MiB and send 1 KiB of it reserve no 40 MiB each, nor do 20 second messages of 40 MiB, on the direct path and on grpc-js's", async () => {
    const inflight = () => metricValue(server.metricsAddress!, "mecatl_drivers_inflight_bytes");
    const before = addressSpace(server);
    const streams = Array.from({ length: 40 }, (_, i) => startSave(h2, 40 * MiB, 1024, i % 2 === 0 ? {} : { "grpc-encoding": "gzip" }));
    // Every prefix has been read (the budget holds each message) and each message's first frame with it.
    await waitFor(async () => (await inflight()) >= 40 * 3 * 40 * MiB, 10_000, "the 40 messages to be taken from the budget");
    // An earlier version reserved each message whole at its prefix: 1.6 GB more here.
    expect(addressSpace(server) - before).toBeLessThan(400 * MiB);
    for (const s of streams) s.close();
    await waitFor(async () => (await inflight()) === 0, 10_000, "the budget to be given back");
    // A second message after a whole small Save is refused at its prefix: never held outside the budget (a fresh-eyes run held 1 GB so).
    const small = toBinary(SaveRequestSchema, create(SaveRequestSchema, { sessionId: "second", snapshot: snapshot(10) }));
    // 256 KiB of the second message each: a Node client queuing more than 10 MiB on one connection is stopped by its own maxSessionMemory.
    const body = Buffer.concat([grpcFramed(small), grpcPrefix(40 * MiB), Buffer.alloc(256 * 1024)]);
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => answerOf(startCall(h2, `/${SessionStoreService.typeName}/Save`, body, i % 2 === 0 ? {} : { "grpc-encoding": "gzip" }))));
    expect(answers.map((a) => a.split(" ")[0])).toEqual(Array(20).fill("3"));
    expect(addressSpace(server) - before).toBeLessThan(400 * MiB);
    // The same connection still carries a large Save whole.
    const client = grpcClient(SessionStoreService, server.address);
    await client.save({ sessionId: "after-held", snapshot: snapshot(20 * MiB) });
    expect((await client.load({ sessionId: "after-held" })).snapshot?.payload.length).toBe(20 * MiB);
  });
});

describe("health answers beside a full budget, and its requests are limited to 4 KiB instead (--max-inflight-bytes 48MB)", () => {
  let server: ServerProcess;
  let h2: ClientHttp2Session;
  serveOverH2(["--max-inflight-bytes", "48MB", "--health-listen", "127.0.0.1:0"], (s, h) => {
    server = s;
    h2 = h;
  });

  /** Starts a health Check on `session` whose prefix announces `declared` bytes, sends `sent` of them, and resolves to its grpc-status and grpc-message. */
  const largeCheck = (session: ClientHttp2Session, declared: number, sent: number) =>
    answerOf(startCall(session, `/${Health.typeName}/Check`, Buffer.concat([grpcPrefix(declared), Buffer.alloc(sent)])));

  test("a Check is SERVING while a stalled Save holds the whole budget; a Check announcing more than 4 KiB is RESOURCE_EXHAUSTED at its prefix, on both listeners, and reserves nothing", async () => {
    // Charged three times with its prefix: exactly the whole budget.
    const stalled = startSave(h2, 16 * MiB - 5, 1024);
    await waitFor(async () => (await metricValue(server.metricsAddress!, "mecatl_drivers_inflight_bytes")) === 48 * MiB, 10_000, "the stalled Save to hold the whole budget");
    expect((await grpcClient(Health, server.address).check({ service: "" })).status).toBe(ServingStatus.SERVING);
    expect((await grpcClient(Health, server.healthAddress!).check({ service: "" })).status).toBe(ServingStatus.SERVING);
    const before = addressSpace(server);
    // 256 KiB of each: more than one frame, which an earlier version took as the cue to reserve the whole 60 MiB.
    const answers = await Promise.all(Array.from({ length: 20 }, () => largeCheck(h2, 60 * MiB, 256 * 1024)));
    expect(answers).toEqual(Array(20).fill(`8 Received message larger than max (${60 * MiB} vs 4096)`));
    expect(addressSpace(server) - before).toBeLessThan(400 * MiB);
    // Under 4 KiB compressed, 8 KiB decompressed: refused too, after 4 KiB of decompression.
    const name = Buffer.concat([Buffer.from([0x0a, 0x80, 0x40]), Buffer.alloc(8192, 0x61)]);
    const zipped = gzipSync(name);
    expect(zipped.length).toBeLessThan(4096);
    const zipCheck = await h2GrpcCall(server.address, `/${Health.typeName}/Check`, Buffer.concat([Buffer.from([1]), grpcPrefix(zipped.length).subarray(1), zipped]), { "grpc-encoding": "gzip" });
    expect(`${zipCheck.status} ${zipCheck.message}`).toBe("8 Received message that decompresses to a size larger than 4096");
    const probes = connect(`http://${server.healthAddress}`);
    expect(await largeCheck(probes, 3 * MiB, 64 * 1024)).toBe(`8 Received message larger than max (${3 * MiB} vs 4096)`);
    probes.close();
    stalled.close();
    await waitFor(async () => (await metricValue(server.metricsAddress!, "mecatl_drivers_inflight_bytes")) === 0, 10_000, "the budget to be given back");
  });
});

describe("a request message that stops arriving (--request-idle-timeout 1s, --max-inflight-bytes 48MB)", () => {
  let server: ServerProcess;
  let h2: ClientHttp2Session;
  serveOverH2(["--max-inflight-bytes", "48MB", "--request-idle-timeout", "1s", "--connect-listen", "127.0.0.1:0"], (s, h) => {
    server = s;
    h2 = h;
  });
  const inflight = () => metricValue(server.metricsAddress!, "mecatl_drivers_inflight_bytes");

  test("ends UNAVAILABLE once no bytes came for 1 s, its stream reset and its budget given back, on the direct path and on grpc-js's; nothing is stored", async () => {
    for (const headers of [{}, { "grpc-encoding": "gzip" }]) {
      const started = Date.now();
      const answer = await unfinishedSave(h2, 12 * MiB, headers);
      expect(Date.now() - started).toBeGreaterThanOrEqual(900);
      expect(answer).toEqual({
        status: String(Code.Unavailable),
        message: `request: no bytes of the request message arrived for 1000 ms (${5 + 64 * 1024} of ${5 + 12 * MiB} bytes received; --request-idle-timeout); nothing was stored`,
        rstCode: 0,
      });
      await waitFor(async () => (await inflight()) === 0, 5_000, "the budget to be given back");
    }
    // The whole budget is free again: a Save of 12 MiB (36 MiB charged of 48 MB) fits.
    const client = grpcClient(SessionStoreService, server.address);
    await client.save({ sessionId: "after-idle", snapshot: snapshot(12 * MiB) });
    expect((await client.load({ sessionId: "after-idle" })).snapshot?.payload.length).toBe(12 * MiB);
  });

  test("on the Connect listener too: a body that stops coming ends unavailable after 1 s, and its budget is given back", async () => {
    const started = Date.now();
    const answer = await new Promise<{ status: number; body: string; connection: string | undefined }>((resolve, reject) => {
      const path = `/${SessionStoreService.typeName}/Save`;
      const req = request(`http://${server.connectAddress}${path}`, { method: "POST", headers: { "content-type": "application/proto", "content-length": String(12 * MiB) } }, (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (text += c));
        res.on("end", () => resolve({ status: res.statusCode!, body: text, connection: res.headers.connection }));
      });
      req.on("error", reject);
      req.write(Buffer.alloc(64 * 1024));
    });
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    expect(answer.status).toBe(503);
    expect(JSON.parse(answer.body)).toMatchObject({
      code: "unavailable",
      message: `request: no bytes of the request body arrived for 1000 ms (${64 * 1024} bytes received; --request-idle-timeout); nothing was stored`,
    });
    // The connection is not kept alive: a next request on it would be read as the rest of this body (it was, a
    // fresh-eyes run: "400 Bad Request" or no answer).
    expect(answer.connection).toBe("close");
    await waitFor(async () => (await inflight()) === 0, 5_000, "the budget to be given back");
  });

  test("a request whose message came whole but which never ends (no END_STREAM) is refused UNAVAILABLE after 1 s, unrun, and its bytes come back", async () => {
    const message = toBinary(SaveRequestSchema, create(SaveRequestSchema, { sessionId: "never-ends", snapshot: snapshot(2 * MiB) }));
    for (const headers of [{}, { "grpc-encoding": "gzip" }]) {
      const body = "grpc-encoding" in headers ? gzipFramedMessage(message) : grpcFramed(message);
      const stream = startCall(h2, `/${SessionStoreService.typeName}/Save`, body, headers);
      const started = Date.now();
      const answer = await answerOf(stream);
      expect(Date.now() - started).toBeGreaterThanOrEqual(900);
      expect(answer).toBe(`${Code.Unavailable} request: the request message arrived whole but the request did not end (no END_STREAM) for 1000 ms (--request-idle-timeout); nothing was stored`);
      await waitFor(async () => (await inflight()) === 0, 5_000, "the budget to be given back");
    }
    await expectCode(grpcClient(SessionStoreService, server.address).load({ sessionId: "never-ends" }), Code.NotFound);
  });

  test("a message whose bytes keep coming, if slowly, is not cut off: 2 MiB in pieces 400 ms apart over 3 s is stored", async () => {
    const message = toBinary(SaveRequestSchema, create(SaveRequestSchema, { sessionId: "trickled", snapshot: snapshot(2 * MiB) }));
    const body = grpcFramed(message);
    const stream = startCall(h2, `/${SessionStoreService.typeName}/Save`, body.subarray(0, 64 * 1024));
    const answer = answerOf(stream);
    const trailers = new Promise<string>((resolve) => stream.on("trailers", (t) => resolve(String(t["grpc-status"]))));
    stream.resume();
    const pieces = 8;
    const step = Math.ceil((body.length - 64 * 1024) / pieces);
    for (let i = 0; i < pieces; i++) {
      await new Promise((resolve) => setTimeout(resolve, 400));
      stream.write(body.subarray(64 * 1024 + i * step, 64 * 1024 + (i + 1) * step));
    }
    stream.end();
    expect((await answer).split(" ")[0]).not.toBe(String(Code.Unavailable));
    expect(await trailers).toBe("0");
    const client = grpcClient(SessionStoreService, server.address);
    expect((await client.load({ sessionId: "trickled" })).snapshot?.payload.length).toBe(2 * MiB);
  });
});
