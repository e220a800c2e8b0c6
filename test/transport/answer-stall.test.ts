import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { connect as h2connect, constants, type ClientHttp2Session } from "node:http2";
import { connect as netConnect } from "node:net";
import { create, toBinary } from "@bufbuild/protobuf";
import { LoadRequestSchema, SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { grpcClient } from "../helpers/clients.js";
import { metricValue } from "../helpers/metrics.js";
import { waitFor } from "../helpers/wait.js";
import { grpcFramed } from "../helpers/h2-grpc-call.js";

const MiB = 1024 * 1024;
const LOAD_PATH = `/${SessionStoreService.typeName}/Load`;
const loadRequest = (sessionId: string) => Buffer.from(toBinary(LoadRequestSchema, create(LoadRequestSchema, { sessionId })));

/**
 * `--answer-idle-timeout` (answer-stall-watch.ts): an answer whose client
 * takes none of its bytes for that long ends, and its share of
 * `--max-inflight-bytes` comes back. A fresh-eyes run of the tenth session
 * paused a 10 MiB Load's stream: its 30 MB stayed charged for as long as the
 * connection lived, and every 10 MiB Save failed RESOURCE_EXHAUSTED.
 */
describe("an answer its client stops reading (--answer-idle-timeout 1s, --max-inflight-bytes 48MB)", () => {
  let server: ServerProcess;
  let h2: ClientHttp2Session;
  const inflight = () => metricValue(server.metricsAddress!, "mecatl_drivers_inflight_bytes");
  beforeAll(async () => {
    server = await startServer(["session-store", "--store", "sqlite::memory:", "--metrics-listen", "127.0.0.1:0", "--max-inflight-bytes", "48MB", "--answer-idle-timeout", "1s", "--connect-listen", "127.0.0.1:0"]);
    await grpcClient(SessionStoreService, server.address).save({ sessionId: "ten", snapshot: { format: "sessnap-json/1", payload: Buffer.alloc(10 * MiB, 0x61) } });
    h2 = h2connect(`http://${server.address}`);
  });
  afterAll(async () => {
    h2?.close();
    await server?.stop();
  });

  test("gRPC listener: a paused Load's stream is reset with CANCEL, its bytes come back, and a 10 MiB Save then fits", async () => {
    const stream = h2.request({ ":method": "POST", ":path": LOAD_PATH, "content-type": "application/grpc", te: "trailers" });
    stream.on("error", () => undefined);
    stream.end(grpcFramed(loadRequest("ten")));
    stream.pause();
    await waitFor(async () => (await inflight()) >= 30 * MiB, 10_000, "the Load's answer to be charged");
    await waitFor(async () => stream.closed, 10_000, "the server to reset the stalled answer");
    expect(stream.rstCode).toBe(constants.NGHTTP2_CANCEL);
    await waitFor(async () => (await inflight()) === 0, 10_000, "the stalled answer's bytes to be given back");
    await grpcClient(SessionStoreService, server.address).save({ sessionId: "after-stall", snapshot: { format: "sessnap-json/1", payload: Buffer.alloc(10 * MiB, 0x62) } });
    expect(server.stderr.some((l) => l.includes("--answer-idle-timeout"))).toBe(true);
  });

  test("Connect listener over HTTP/1.1: a connection that stops reading its Load's answer is closed, and its bytes come back", async () => {
    const socket = netConnect(Number(server.connectAddress!.split(":")[1]), "127.0.0.1");
    socket.on("error", () => undefined);
    const body = loadRequest("ten");
    socket.write(`POST ${LOAD_PATH} HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/proto\r\ncontent-length: ${body.length}\r\n\r\n`);
    socket.write(body);
    // Read the first bytes, then stop: the kernel's buffers fill and the rest waits on the server.
    await new Promise((resolve) => socket.once("data", resolve));
    socket.pause();
    await waitFor(async () => (await inflight()) >= 30 * MiB, 10_000, "the Load's answer to be charged");
    await waitFor(async () => (await inflight()) === 0, 10_000, "the server to end the stalled answer and give its bytes back");
    // The server closed the connection: reading again, the client reaches its end before the whole answer.
    let read = 0;
    socket.on("data", (c: Buffer) => (read += c.length));
    socket.resume();
    await new Promise((resolve) => socket.once("close", resolve));
    expect(read).toBeLessThan(10 * MiB);
    socket.destroy();
  });

  test("a slow reader is not cut off: a 2 MiB answer read in short bursts 600 ms apart arrives whole", async () => {
    await grpcClient(SessionStoreService, server.address).save({ sessionId: "half", snapshot: { format: "sessnap-json/1", payload: Buffer.alloc(2 * MiB, 0x63) } });
    const stream = h2.request({ ":method": "POST", ":path": LOAD_PATH, "content-type": "application/grpc", te: "trailers" });
    stream.on("error", () => undefined);
    stream.end(grpcFramed(loadRequest("half")));
    let received = 0;
    let ended = false;
    let status = "none";
    stream.once("trailers", (t) => (status = String(t["grpc-status"])));
    stream.on("data", (c: Buffer) => (received += c.length));
    stream.once("end", () => (ended = true));
    let bursts = 0;
    while (!ended && !stream.closed) {
      stream.pause();
      await new Promise((resolve) => setTimeout(resolve, 600));
      stream.resume();
      await new Promise((resolve) => setTimeout(resolve, 2));
      bursts++;
    }
    await waitFor(async () => stream.closed, 5_000, "the stream to close");
    expect(stream.rstCode).toBe(constants.NGHTTP2_NO_ERROR);
    expect(status).toBe("0");
    expect(received).toBeGreaterThan(2 * MiB);
    // It took several bursts, 600 ms apart: longer in all than --answer-idle-timeout.
    expect(bursts).toBeGreaterThan(3);
  }, 60_000);
});
