import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { gzipSync } from "node:zlib";
import { create, toBinary } from "@bufbuild/protobuf";
import { SessionLeaseService } from "../../gen/mecatl/driver/v1/session_lease_pb.js";
import { EventLogService } from "../../gen/mecatl/driver/v1/event_log_pb.js";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { conformanceBackends, type TestBackend } from "../helpers/backends.js";
import { grpcClient } from "../helpers/clients.js";
import { grpcFramed, grpcPrefix, h2GrpcCall } from "../helpers/h2-grpc-call.js";

const prefix = grpcPrefix;
const framed = grpcFramed;

/** Posts `body` to `path` as a gRPC call (h2-grpc-call.ts) and resolves to its grpc-status and grpc-message. */
async function rawCall(address: string, path: string, body: Buffer | Buffer[], extra: Record<string, string> = {}): Promise<{ status: string | undefined; message: string }> {
  const { status, message } = await h2GrpcCall(address, path, body, extra);
  return { status, message };
}

/**
 * A gRPC body that does not hold exactly one whole request message is a bad
 * request: INVALID_ARGUMENT, as every other bad request (wire-contract.md
 * section 1). grpc-js alone answers UNIMPLEMENTED, which the harness takes
 * for a feature this driver lacks: it disables leasing for the process on
 * Acquire (section 4.3), event-log cursors on Append (3.6), the session store
 * client on Capabilities (2.4). Found by a fresh-eyes run.
 */
describe.each(conformanceBackends())("gRPC bodies without exactly one request message, on $name", (backend: TestBackend) => {
  let server: ServerProcess;
  const acquire = `/${SessionLeaseService.typeName}/Acquire`;
  const acquireBytes = (owner: string, sessionId = "framing") => toBinary(SessionLeaseService.method.acquire.input, create(SessionLeaseService.method.acquire.input, { sessionId, owner }));
  beforeAll(async () => {
    const setup = await backend.setup();
    server = await startServer(["--store", setup.store, ...setup.args]);
  });
  afterAll(async () => {
    await server?.stop();
    await backend.teardown();
  });

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

  const save = `/${SessionStoreService.typeName}/Save`;
  const saveBytes = (sessionId: string) =>
    toBinary(SessionStoreService.method.save.input, create(SessionStoreService.method.save.input, { sessionId, snapshot: { format: "sessnap-json/1", payload: Buffer.from(JSON.stringify({ id: sessionId })) } }));
  const stored = async (sessionId: string) => (await grpcClient(SessionStoreService, server.address).list({})).sessions.some((s) => s.sessionId === sessionId);

  test.each([
    ["an empty second prefix", (m: Buffer) => Buffer.concat([m, prefix(0).subarray(0, 4)]), "4 bytes follow the request message"],
    ["four bytes of a second prefix", (m: Buffer) => Buffer.concat([m, m.subarray(0, 4)]), "4 bytes follow the request message"],
    ["one stray byte", (m: Buffer) => Buffer.concat([m, Buffer.from([0])]), "1 bytes follow the request message"],
  ])("a whole Save followed by %s is INVALID_ARGUMENT and the Save is not applied", async (_label, body, message) => {
    const id = `trailing-${message.split(" ")[0]}`;
    const got = await rawCall(server.address, save, body(framed(saveBytes(id))));
    expect(got).toEqual({ status: "3", message: `request: ${message}; this method takes one message` });
    expect(await stored(id)).toBe(false);
  });

  test.each([
    ["plain (the direct path)", {}, (m: Uint8Array) => framed(m)],
    ["gzip-compressed (grpc-js's path)", { "grpc-encoding": "gzip" }, (m: Uint8Array) => Buffer.concat([Buffer.from([1]), framed(gzipSync(m)).subarray(1)])],
  ])("a whole Save, %s, followed by a second message's prefix and part of it is refused INVALID_ARGUMENT at that prefix, and the Save is not applied", async (label, headers, frame) => {
    const id = `second-prefix-${label.split(" ")[0]}`;
    // The second message announces 60 MiB and never comes whole: it is refused at its prefix, not held until it is.
    const second = Buffer.concat([prefix(60 * 1024 * 1024), Buffer.alloc(9)]);
    const got = await rawCall(server.address, save, Buffer.concat([frame(saveBytes(id)), second]), headers);
    expect(got).toEqual({ status: "3", message: "request: the call carried more than one request message; this method takes one" });
    expect(await stored(id)).toBe(false);
  });

  test("a whole gzip-compressed Save followed by one stray byte (grpc-js's path) is INVALID_ARGUMENT and the Save is not applied", async () => {
    const id = "trailing-gzip";
    const compressed = framed(gzipSync(saveBytes(id)));
    compressed[0] = 1;
    const got = await rawCall(server.address, save, Buffer.concat([compressed, Buffer.from([0])]), { "grpc-encoding": "gzip" });
    expect(got).toEqual({ status: "3", message: "request: 1 bytes follow the request message; this method takes one message" });
    expect(await stored(id)).toBe(false);
  });

  test.each([
    ["flags 0x02 (a reserved bit)", {}, (m: Uint8Array) => Buffer.concat([Buffer.from([2]), prefix(m.length).subarray(1), m]), "request: the message prefix's flags are 0x02; only 0 (plain) and 1 (compressed) exist"],
    ["the compressed flag without grpc-encoding", {}, (m: Uint8Array) => Buffer.concat([Buffer.from([1]), prefix(m.length).subarray(1), m]), "request: the message is marked compressed, but the call names no compression (grpc-encoding)"],
    [
      "grpc-encoding gzip and bytes that are not gzip",
      { "grpc-encoding": "gzip" },
      (m: Uint8Array) => Buffer.concat([Buffer.from([1]), prefix(m.length).subarray(1), m]),
      "request: the gzip-compressed message does not decompress (incorrect header check)",
    ],
    [
      "grpc-encoding gzip and a gzip stream cut short",
      { "grpc-encoding": "gzip" },
      (m: Uint8Array) => {
        const z = gzipSync(m).subarray(0, 12);
        return Buffer.concat([Buffer.from([1]), prefix(z.length).subarray(1), z]);
      },
      "request: the gzip-compressed message does not decompress (unexpected end of file)",
    ],
  ])("a Save with %s is INVALID_ARGUMENT (not INTERNAL) and is not applied", async (label, headers, body, message) => {
    const id = `flags-${label.length}`;
    const got = await rawCall(server.address, save, body(saveBytes(id)), headers);
    expect(got).toEqual({ status: "3", message });
    expect(await stored(id)).toBe(false);
  });

  test("a gzip-compressed Save whose prefix and message arrive in pieces is checked whole and served; a corrupt one in pieces is refused", async () => {
    const z = gzipSync(saveBytes("gzip-pieces"));
    const framedZ = Buffer.concat([Buffer.from([1]), prefix(z.length).subarray(1), z]);
    const got = await rawCall(server.address, save, [framedZ.subarray(0, 3), framedZ.subarray(3, 9), framedZ.subarray(9)], { "grpc-encoding": "gzip" });
    expect(got.status).toBe("0");
    expect(await stored("gzip-pieces")).toBe(true);
    const bad = Buffer.from(framedZ);
    bad[bad.length - 3]! ^= 0xff; // in the gzip trailer: the CRC no longer matches
    const refused = await rawCall(server.address, save, [bad.subarray(0, 3), bad.subarray(3, 9), bad.subarray(9)], { "grpc-encoding": "gzip" });
    expect(refused.status).toBe("3");
    expect(refused.message).toMatch(/^request: the gzip-compressed message does not decompress/);
  });

  test("a gzip-compressed Save that decompresses is served", async () => {
    const z = gzipSync(saveBytes("gzip-ok"));
    const got = await rawCall(server.address, save, Buffer.concat([Buffer.from([1]), prefix(z.length).subarray(1), z]), { "grpc-encoding": "gzip" });
    expect(got.status).toBe("0");
    expect(await stored("gzip-ok")).toBe(true);
  });

  test("one whole message still works over the same raw path", async () => {
    const got = await rawCall(server.address, acquire, framed(acquireBytes("raw-ok", "framing-ok")));
    expect(got.status).toBe("0");
  });
});
