import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { connect, constants } from "node:http2";
import { connect as netConnect } from "node:net";
import * as grpc from "@grpc/grpc-js";
import { create, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError, type HandlerContext } from "@connectrpc/connect";
import { SessionLeaseService, type AcquireRequest } from "../../gen/mecatl/driver/v1/session_lease_pb.js";
import { Health } from "../../gen/grpc/health/v1/health_pb.js";
import { DirectUnaryPath, type DirectRoute } from "../../services/server/grpc-direct-unary.js";
import { mountOnGrpc, OpenStreams, type AnyServiceImpl } from "../../services/server/grpc-adapter.js";
import { grpcAdmission, type AdmissionOptions } from "../../services/server/admission.js";
import { InflightBudget } from "../../services/server/inflight-budget.js";
import { TokenFile } from "../../services/server/auth.js";
import { createLogger } from "../../services/server/logger.js";
import { errorWithReason } from "../../services/rpc/errors.js";
import { healthService, HealthState } from "../../services/server/health.js";
import { waitFor } from "../helpers/wait.js";
import { grpcFramed, h2GrpcCall, type H2GrpcAnswer } from "../helpers/h2-grpc-call.js";

const MiB = 1024 * 1024;
const ACQUIRE = `/${SessionLeaseService.typeName}/Acquire`;
const acquireBytes = (owner: string) => toBinary(SessionLeaseService.method.acquire.input, create(SessionLeaseService.method.acquire.input, { sessionId: "s", owner }));
/** The same request gzip-compressed, as a client that compresses would send it (grpc-js then serves the call). */
const gzipped = (message: Uint8Array) => {
  const framed = grpcFramed(gzipSync(message));
  framed[0] = 1;
  return framed;
};

/** A DirectUnaryPath that notes the path of every call it serves. */
class ObservedPath extends DirectUnaryPath {
  readonly served: string[] = [];
  override add(path: string, route: DirectRoute): void {
    super.add(path, {
      run: (call) => {
        this.served.push(path);
        return route.run(call);
      },
    });
  }
}

/**
 * Issue 11 deliverable 1: plain unary calls are served straight from their
 * HTTP/2 stream (grpc-direct-unary.ts); every other call still goes through
 * grpc-js. The two must not be told apart by a client: each case here is
 * sent once as a plain call (the direct path) and once with its request
 * gzip-compressed (grpc-js, with the admission interceptor), to a grpc-js
 * server set up as server.ts sets it up, and the answers are compared
 * header by header. The transport tests (grpc-framing, inflight-budget,
 * admission, auth, shutdown) hold the rest of the rules on the real server.
 */
describe("the direct unary path", () => {
  let server: grpc.Server;
  let address: string;
  let path: ObservedPath;
  /** What the Acquire handler saw of its context, by owner: the abort reason once its signal aborted. */
  const aborted = new Map<string, string>();
  const waiting = new Map<string, () => void>();
  /** How many times the Acquire handler ran, by session id, for owner "counted". */
  const runs = new Map<string, number>();

  beforeAll(async () => {
    const tokens = join(mkdtempSync(join(tmpdir(), "mecatl-direct-")), "tokens");
    writeFileSync(tokens, "tok\n");
    const admission: AdmissionOptions = { auth: new TokenFile(tokens, createLogger("silent")), budget: new InflightBudget(64 * MiB, 100), maxMessageBytes: 2 * MiB };
    server = new grpc.Server({ "grpc.max_receive_message_length": 2 * MiB, "grpc.max_send_message_length": 2 * MiB, interceptors: [grpcAdmission(admission)] });
    path = new ObservedPath(admission, createLogger("silent"));
    path.install(server);
    const impl: AnyServiceImpl = {
      acquire: async (req: AcquireRequest, ctx: HandlerContext) => {
        switch (req.owner) {
          case "details":
            throw errorWithReason(Code.FailedPrecondition, "cursor_expired", "a refusal with ErrorInfo: 100% sure?");
          case "surrogate":
            throw new ConnectError("a message with a lone surrogate \ud800 in it", Code.InvalidArgument);
          case "internal":
            throw new Error("a stray failure");
          case "counted":
            runs.set(req.sessionId, (runs.get(req.sessionId) ?? 0) + 1);
            return { lease: { sessionId: req.sessionId, owner: req.owner } };
          case "big":
            return { lease: { sessionId: "x".repeat(3 * MiB), owner: req.owner } };
          case "metadata":
            return { lease: { sessionId: ctx.requestHeader.get("x-note") ?? "none", owner: String(Number.isFinite(ctx.timeoutMs() ?? Infinity)) } };
          case "wait":
            await new Promise<void>((resolve) => {
              waiting.set(req.sessionId, resolve);
              ctx.signal.addEventListener("abort", () => {
                aborted.set(req.sessionId, (ctx.signal.reason as ConnectError).code === Code.Canceled ? "canceled" : String(ctx.signal.reason));
                resolve();
              });
            });
            return { lease: { sessionId: req.sessionId, owner: "waited" } };
          default:
            return { lease: { sessionId: req.sessionId, owner: req.owner, token: 7n } };
        }
      },
    };
    mountOnGrpc(server, SessionLeaseService, impl, new OpenStreams(), admission.budget, path);
    mountOnGrpc(server, Health, healthService(new HealthState([SessionLeaseService.typeName])) as unknown as AnyServiceImpl, new OpenStreams(), admission.budget);
    const port = await new Promise<number>((resolve, reject) => server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))));
    address = `127.0.0.1:${port}`;
  });
  afterAll(() => server?.forceShutdown());

  /** Sends `owner`'s Acquire both ways and answers both answers and which path served each. */
  async function bothWays(owner: string, headers: Record<string, string> = { authorization: "Bearer tok" }): Promise<{ direct: H2GrpcAnswer; viaGrpcJs: H2GrpcAnswer; served: string[] }> {
    path.served.length = 0;
    const direct = await h2GrpcCall(address, ACQUIRE, grpcFramed(acquireBytes(owner)), headers);
    const viaGrpcJs = await h2GrpcCall(address, ACQUIRE, gzipped(acquireBytes(owner)), { ...headers, "grpc-encoding": "gzip" });
    return { direct, viaGrpcJs, served: [...path.served] };
  }

  test.each([
    ["an answer", "o", "0"],
    ["a refusal with details (grpc-status-details-bin) and a message to URI-encode", "details", "9"],
    ["an unexpected failure (INTERNAL)", "internal", "13"],
    ["an answer over the message limit (RESOURCE_EXHAUSTED)", "big", "8"],
  ])("%s: the same headers, body and trailers on both paths", async (_label, owner, status) => {
    const { direct, viaGrpcJs, served } = await bothWays(owner);
    expect(served).toEqual([ACQUIRE]);
    expect(direct.status).toBe(status);
    if (owner === "big") expect(direct.message).toMatch(/^Sent message larger than max/);
    expect(direct).toEqual(viaGrpcJs);
  });

  test("a message holding a lone UTF-16 surrogate is sent with U+FFFD in its place, alike on both paths (encodeURI would throw, and the unhandled rejection end the process)", async () => {
    const { direct, viaGrpcJs } = await bothWays("surrogate");
    expect(direct).toMatchObject({ status: String(Code.InvalidArgument), message: "a message with a lone surrogate \ufffd in it" });
    expect(direct).toEqual(viaGrpcJs);
    // The server still answers.
    expect((await h2GrpcCall(address, ACQUIRE, grpcFramed(acquireBytes("o")), { authorization: "Bearer tok" })).status).toBe("0");
  });

  test("UNAUTHENTICATED without a token, alike on both paths, and the handler never runs", async () => {
    const { direct, viaGrpcJs, served } = await bothWays("o", {});
    expect(served).toEqual([]);
    expect(direct).toMatchObject({ status: String(Code.Unauthenticated), message: "missing authorization: Bearer <token> metadata" });
    expect(direct).toEqual(viaGrpcJs);
  });

  test("a request that is not valid protobuf is INVALID_ARGUMENT naming the request, alike on both paths", async () => {
    path.served.length = 0;
    const bad = Buffer.from([0x0a, 0x05, 0x61]);
    const direct = await h2GrpcCall(address, ACQUIRE, grpcFramed(bad), { authorization: "Bearer tok" });
    const viaGrpcJs = await h2GrpcCall(address, ACQUIRE, gzipped(bad), { authorization: "Bearer tok", "grpc-encoding": "gzip" });
    expect(path.served).toEqual([ACQUIRE]);
    expect(direct.status).toBe(String(Code.InvalidArgument));
    expect(direct).toEqual(viaGrpcJs);
  });

  test("the handler sees the call's metadata and deadline on the direct path as on grpc-js", async () => {
    const { direct, viaGrpcJs } = await bothWays("metadata", { authorization: "Bearer tok", "x-note": "hello", "grpc-timeout": "5S" });
    expect(direct).toEqual(viaGrpcJs);
    expect(direct.body.subarray(5).toString("latin1")).toContain("hello");
    expect(direct.body.subarray(5).toString("latin1")).toContain("true");
  });

  test("a deadline that passes ends the call DEADLINE_EXCEEDED and aborts the handler's signal, alike on both paths", async () => {
    const answers: H2GrpcAnswer[] = [];
    for (const compressed of [false, true]) {
      const id = compressed ? "deadline-grpc-js" : "deadline-direct";
      const bytes = toBinary(SessionLeaseService.method.acquire.input, create(SessionLeaseService.method.acquire.input, { sessionId: id, owner: "wait" }));
      const headers = { authorization: "Bearer tok", "grpc-timeout": "100m", ...(compressed ? { "grpc-encoding": "gzip" } : {}) };
      answers.push(await h2GrpcCall(address, ACQUIRE, compressed ? gzipped(bytes) : grpcFramed(bytes), headers));
      expect(aborted.get(id)).toBe("canceled");
    }
    expect(answers[0]).toMatchObject({ status: String(Code.DeadlineExceeded), message: "Deadline exceeded" });
    expect(answers[0]).toEqual(answers[1]);
  });

  // grpc-js races its own zero-length timer here: in this process, with a handler that answers at once, it ran the method and answered OK.
  test.each(["0n", "1n", "999u", "0S"])("a deadline already passed on arrival (grpc-timeout %s) is DEADLINE_EXCEEDED and the method never runs", async (timeout) => {
    const id = `expired-${timeout}`;
    const bytes = toBinary(SessionLeaseService.method.acquire.input, create(SessionLeaseService.method.acquire.input, { sessionId: id, owner: "counted" }));
    path.served.length = 0;
    for (let i = 0; i < 20; i++) {
      const got = await h2GrpcCall(address, ACQUIRE, grpcFramed(bytes), { authorization: "Bearer tok", "grpc-timeout": timeout });
      expect(got).toMatchObject({ status: String(Code.DeadlineExceeded), message: "Deadline exceeded" });
    }
    expect(runs.get(id) ?? 0).toBe(0);
    expect(path.served).toEqual([]);
  });

  test("a deadline too far for a timer (99999999H) is kept, not taken for one already passed", async () => {
    path.served.length = 0;
    const got = await h2GrpcCall(address, ACQUIRE, grpcFramed(acquireBytes("far")), { authorization: "Bearer tok", "grpc-timeout": "99999999H" });
    expect(path.served).toEqual([ACQUIRE]);
    expect(got.status).toBe("0");
  });

  test("a client that cancels the call aborts the handler's signal", async () => {
    const session = connect(`http://${address}`);
    try {
      const bytes = toBinary(SessionLeaseService.method.acquire.input, create(SessionLeaseService.method.acquire.input, { sessionId: "cancel-direct", owner: "wait" }));
      const stream = session.request({ ":method": "POST", ":path": ACQUIRE, "content-type": "application/grpc", te: "trailers", authorization: "Bearer tok" });
      stream.on("error", () => undefined);
      stream.end(grpcFramed(bytes));
      await waitFor(() => waiting.has("cancel-direct"), 5000, "the handler to start");
      stream.close(constants.NGHTTP2_CANCEL);
      await waitFor(() => aborted.has("cancel-direct"), 5000, "the handler's signal to abort");
      expect(aborted.get("cancel-direct")).toBe("canceled");
    } finally {
      session.close();
    }
  });

  test("a call whose client resets the stream after its whole message, without ending its side, never runs its method", async () => {
    // Node ends the readable side of a reset stream as if its body had ended. Node's own client ends its side
    // before a reset, so the frames are written by hand: HEADERS, DATA without END_STREAM, RST_STREAM CANCEL.
    const id = "reset-after-body";
    const bytes = toBinary(SessionLeaseService.method.acquire.input, create(SessionLeaseService.method.acquire.input, { sessionId: id, owner: "counted" }));
    const [host, port] = address.split(":");
    const socket = netConnect(Number(port), host);
    socket.on("data", () => undefined);
    socket.on("error", () => undefined);
    const frames = [Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), h2Frame(0x4, 0, 0, Buffer.alloc(0))];
    const fields = { ":method": "POST", ":scheme": "http", ":path": ACQUIRE, ":authority": "x", "content-type": "application/grpc", te: "trailers", authorization: "Bearer tok" };
    for (let stream = 1; stream <= 19; stream += 2) {
      frames.push(h2Frame(0x1, 0x4, stream, hpackLiterals(fields)), h2Frame(0x0, 0, stream, grpcFramed(bytes)), h2Frame(0x3, 0, stream, Buffer.from([0, 0, 0, constants.NGHTTP2_CANCEL])));
    }
    socket.write(Buffer.concat(frames));
    await new Promise((resolve) => setTimeout(resolve, 300));
    socket.destroy();
    expect(runs.get(id) ?? 0).toBe(0);
  });

  test("installing the direct path on a server that already listens is refused: it would never see a call", async () => {
    const late = new grpc.Server();
    await new Promise<number>((resolve, reject) => late.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))));
    try {
      expect(() => new DirectUnaryPath({ budget: new InflightBudget(MiB, 0), maxMessageBytes: MiB }, createLogger("silent")).install(late)).toThrow(/must be installed before the gRPC server binds/);
    } finally {
      late.forceShutdown();
    }
  });

  test.each([
    ["a gzip-compressed request", gzipped(acquireBytes("o")), { "grpc-encoding": "gzip" }],
    ["a content type other than application/grpc[+proto]", grpcFramed(acquireBytes("o")), { "content-type": "application/grpc+json" }],
    ["a grpc-timeout grpc-js reads but the spec does not write (a space before the unit)", grpcFramed(acquireBytes("o")), { "grpc-timeout": "5 S" }],
  ])("%s is left to grpc-js", async (_label, body, extra) => {
    path.served.length = 0;
    const got = await h2GrpcCall(address, ACQUIRE, body, { authorization: "Bearer tok", ...extra });
    expect(path.served).toEqual([]);
    expect(got.status).toBeDefined();
  });

  test("health is left to grpc-js and needs no token", async () => {
    path.served.length = 0;
    const got = await h2GrpcCall(address, `/${Health.typeName}/Check`, grpcFramed(new Uint8Array(0)));
    expect(got.status).toBe("0");
    expect(path.served).toEqual([]);
  });
});

/** One HTTP/2 frame (RFC 9113 section 4.1): a 9-byte header (length, type, flags, stream id), then `payload`. */
function h2Frame(type: number, flags: number, stream: number, payload: Buffer): Buffer {
  const header = Buffer.alloc(9);
  header.writeUIntBE(payload.length, 0, 3);
  header[3] = type;
  header[4] = flags;
  header.writeUInt32BE(stream, 5);
  return Buffer.concat([header, payload]);
}

/** A header block of HPACK literals without indexing and without Huffman coding (RFC 7541 section 6.2.2; names and values under 127 bytes). */
function hpackLiterals(fields: Record<string, string>): Buffer {
  return Buffer.concat(Object.entries(fields).map(([name, value]) => Buffer.concat([Buffer.from([0, name.length]), Buffer.from(name), Buffer.from([value.length]), Buffer.from(value)])));
}
