import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { writeFileSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect } from "node:http2";
import * as grpc from "@grpc/grpc-js";
import { Code, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { EventLogService } from "../../gen/mecatl/driver/v1/event_log_pb.js";
import { Health, HealthCheckResponse_ServingStatus } from "../../gen/grpc/health/v1/health_pb.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { grpcClient, MAX_MESSAGE_BYTES } from "../helpers/clients.js";
import { expectCode } from "../helpers/errors.js";
import { rawGrpcClient, rawUnary } from "../helpers/raw-grpc.js";
import { rssBytes } from "../helpers/rss.js";
import { unfinishedSave } from "../helpers/unfinished-request.js";

const MiB = 1024 * 1024;

/** Sends `bytes` as the request of `path` as they are (no encoding), with optional metadata. */
function rawCall(address: string, path: string, bytes: Buffer, metadata = new grpc.Metadata()): Promise<grpc.ServiceError | Buffer> {
  const client = new grpc.Client(address, grpc.credentials.createInsecure(), {
    "grpc.max_send_message_length": MAX_MESSAGE_BYTES,
    "grpc.max_receive_message_length": MAX_MESSAGE_BYTES,
  });
  return new Promise((resolve) =>
    client.makeUnaryRequest(path, (b: Buffer) => b, (b: Buffer) => b, bytes, metadata, (err, res) => {
      client.close();
      resolve(err ?? res!);
    }),
  );
}

/**
 * Issue 10 deliverable 1: with --auth-token-file the token is checked from the
 * metadata before the request body is read, on the gRPC and the Connect
 * listener alike; health stays open.
 */
describe("authentication before the body (--auth-token-file)", () => {
  let server: ServerProcess;
  beforeAll(async () => {
    const tokenFile = join(mkdtempSync(join(tmpdir(), "mecatl-auth-")), "tokens");
    writeFileSync(tokenFile, "tok-123\n");
    server = await startServer(["session-store", "event-log", "--store", "sqlite::memory:", "--auth-token-file", tokenFile, "--connect-listen", "127.0.0.1:0"]);
  });
  afterAll(() => server?.stop());

  test("an unauthenticated request whose body is still arriving is refused, then its stream reset NO_ERROR", async () => {
    // A client that keeps sending (and the stream open) after the refusal must not keep a stream of the server's.
    const h2 = connect(`http://${server.address}`);
    try {
      expect(await unfinishedSave(h2, 20 * MiB)).toEqual({ status: String(Code.Unauthenticated), message: "missing authorization: Bearer <token> metadata", rstCode: 0 });
    } finally {
      h2.close();
    }
  });

  test("an unauthenticated 60 MiB Save is refused UNAUTHENTICATED and server memory does not grow", async () => {
    const pid = server.proc.pid!;
    const save = SessionStoreService.method.save;
    const client = rawGrpcClient(SessionStoreService, server.address);
    const before = rssBytes(pid);
    for (let i = 0; i < 3; i++) {
      const err = await rawUnary(client, save, { sessionId: `big-${i}`, snapshot: { format: "sessnap-json/1", payload: Buffer.alloc(60 * MiB, 0x61) } }).catch((e: grpc.ServiceError) => e);
      expect((err as grpc.ServiceError).code).toBe(grpc.status.UNAUTHENTICATED);
    }
    const grown = rssBytes(pid) - before;
    client.close();
    // Three 60 MiB bodies read and decoded would add well over 60 MiB; refused from the metadata they add next to nothing.
    expect(grown).toBeLessThan(32 * MiB);
  });

  test("garbage without a token is UNAUTHENTICATED, not INVALID_ARGUMENT", async () => {
    const err = (await rawCall(server.address, `/${SessionStoreService.typeName}/Save`, Buffer.from([0xff, 0xff, 0xff, 0x07, 0x00]))) as grpc.ServiceError;
    expect(err.code).toBe(grpc.status.UNAUTHENTICATED);
    const withToken = new grpc.Metadata();
    withToken.set("authorization", "Bearer tok-123");
    const invalid = (await rawCall(server.address, `/${SessionStoreService.typeName}/Save`, Buffer.from([0xff, 0xff, 0xff, 0x07, 0x00]), withToken)) as grpc.ServiceError;
    expect(invalid.code).toBe(grpc.status.INVALID_ARGUMENT);
  });

  test("health is open on the gRPC listener", async () => {
    expect((await grpcClient(Health, server.address).check({ service: "" })).status).toBe(HealthCheckResponse_ServingStatus.SERVING);
  });

  test("the Connect listener refuses a call without a token before reading it, unary and streaming, in Connect and gRPC-Web", async () => {
    const baseUrl = `http://${server.connectAddress}`;
    const request = { sessionId: "c", snapshot: { format: "sessnap-json/1", payload: Buffer.alloc(8 * MiB, 0x61) } };
    for (const transport of [createConnectTransport({ baseUrl, httpVersion: "1.1" }), createGrpcWebTransport({ baseUrl, httpVersion: "1.1" })]) {
      await expectCode(createClient(SessionStoreService, transport).save(request), Code.Unauthenticated, "authorization");
      const stream = async () => {
        for await (const _ of createClient(EventLogService, transport).readAfter({ sessionId: "c" })) void _;
      };
      await expectCode(stream(), Code.Unauthenticated, "authorization");
    }
    const authed = createConnectTransport({
      baseUrl,
      httpVersion: "1.1",
      interceptors: [(next) => (req) => (req.header.set("authorization", "Bearer tok-123"), next(req))],
    });
    expect((await createClient(SessionStoreService, authed).capabilities({})).contract).toBe("session-store/1");
    const health = createClient(Health, createConnectTransport({ baseUrl, httpVersion: "1.1" }));
    expect((await health.check({ service: "" })).status).toBe(HealthCheckResponse_ServingStatus.SERVING);
  });
});
