import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { connect, constants } from "node:http2";
import { create, toBinary } from "@bufbuild/protobuf";
import { SessionLeaseService } from "../../gen/mecatl/driver/v1/session_lease_pb.js";
import { EventLogService } from "../../gen/mecatl/driver/v1/event_log_pb.js";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { grpcClient } from "../helpers/clients.js";

/** A gRPC message prefix: flags 0 and a 4-byte big-endian length. */
const prefix = (length: number) => Buffer.from([0, (length >>> 24) & 0xff, (length >>> 16) & 0xff, (length >>> 8) & 0xff, length & 0xff]);
const framed = (message: Uint8Array) => Buffer.concat([prefix(message.length), message]);

/** Posts `body` to `path` over HTTP/2 as a gRPC call and resolves to its grpc-status and grpc-message. */
function rawCall(address: string, path: string, body: Buffer): Promise<{ status: string | undefined; message: string }> {
  return new Promise((resolve, reject) => {
    const session = connect(`http://${address}`);
    session.on("error", reject);
    const stream = session.request({ [constants.HTTP2_HEADER_METHOD]: "POST", [constants.HTTP2_HEADER_PATH]: path, "content-type": "application/grpc", te: "trailers" });
    let headers: Record<string, unknown> = {};
    stream.on("response", (h) => (headers = h));
    stream.on("trailers", (t) => (headers = { ...headers, ...t }));
    stream.on("data", () => undefined);
    stream.on("error", reject);
    stream.on("close", () => {
      session.close();
      resolve({ status: headers["grpc-status"] as string | undefined, message: decodeURIComponent((headers["grpc-message"] as string | undefined) ?? "") });
    });
    stream.end(body);
  });
}

/**
 * A gRPC body that does not hold exactly one whole request message is a bad
 * request: INVALID_ARGUMENT, as every other bad request (wire-contract.md
 * section 1). grpc-js alone answers UNIMPLEMENTED, which the harness takes
 * for a feature this driver lacks: it disables leasing for the process on
 * Acquire (section 4.3), event-log cursors on Append (3.6), the session store
 * client on Capabilities (2.4). Found by a fresh-eyes run.
 */
describe("gRPC bodies without exactly one request message", () => {
  let server: ServerProcess;
  const acquire = `/${SessionLeaseService.typeName}/Acquire`;
  const acquireBytes = (owner: string, sessionId = "framing") => toBinary(SessionLeaseService.method.acquire.input, create(SessionLeaseService.method.acquire.input, { sessionId, owner }));
  beforeAll(async () => {
    server = await startServer(["--store", "sqlite::memory:"]);
  });
  afterAll(() => server?.stop());

  test.each([
    ["a prefix declaring more bytes than the body holds (Acquire)", acquire, () => Buffer.concat([prefix(100), Buffer.from(acquireBytes("a").subarray(0, 3))])],
    ["an empty body (Acquire)", acquire, () => Buffer.alloc(0)],
    ["half a prefix (Append)", `/${EventLogService.typeName}/Append`, () => Buffer.from([0, 0])],
    ["an empty body (Capabilities)", `/${SessionStoreService.typeName}/Capabilities`, () => Buffer.alloc(0)],
    ["an empty body (ReadAfter, server streaming)", `/${EventLogService.typeName}/ReadAfter`, () => Buffer.alloc(0)],
  ])("%s is INVALID_ARGUMENT, not UNIMPLEMENTED", async (_label, path, body) => {
    const got = await rawCall(server.address, path, body());
    expect(got).toEqual({ status: "3", message: expect.stringMatching(/^request: the call carried no whole request message/) });
  });

  test("two request messages on a unary method are INVALID_ARGUMENT, and the Acquire is not applied", async () => {
    const got = await rawCall(server.address, acquire, Buffer.concat([framed(acquireBytes("first")), framed(acquireBytes("second"))]));
    expect(got).toEqual({ status: "3", message: "request: the call carried more than one request message; this method takes one" });
    // Nobody holds the lease: a third owner gets it.
    const lease = (await grpcClient(SessionLeaseService, server.address).acquire({ sessionId: "framing", owner: "third" })).lease;
    expect(lease?.owner).toBe("third");
  });

  test("one whole message still works over the same raw path", async () => {
    const got = await rawCall(server.address, acquire, framed(acquireBytes("raw-ok", "framing-ok")));
    expect(got.status).toBe("0");
  });
});
