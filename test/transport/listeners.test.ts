import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { create, fromJson, toBinary, type JsonValue } from "@bufbuild/protobuf";
import { ListSessionsResponseSchema, SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { grpcClient, MAX_MESSAGE_BYTES } from "../helpers/clients.js";
import { rawGrpcClient, rawUnary } from "../helpers/raw-grpc.js";
import { inParallel } from "../helpers/seed.js";

const snap = (payload: Uint8Array) => ({ format: "sessnap-json/1", payload });

describe("listeners", () => {
  let server: ServerProcess;
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "mecatl-listen-"));
    server = await startServer(["--store", `sqlite:${join(dir, "db.sqlite")}`, "--connect-listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"]);
  });
  afterAll(() => server?.stop());

  test("a 40 MiB snapshot round-trips through a plain grpc-js client", async () => {
    const raw = rawGrpcClient(SessionStoreService, server.address);
    const payload = randomBytes(40 * 1024 * 1024);
    await rawUnary(raw, SessionStoreService.method.save, { sessionId: "forty", snapshot: snap(payload) });
    const got = await rawUnary(raw, SessionStoreService.method.load, { sessionId: "forty" });
    expect(Buffer.from(got.snapshot!.payload).equals(payload)).toBe(true);
    raw.close();
  });

  test("a gRPC client, a Connect client and a gRPC-Web client reach the same server", async () => {
    const viaGrpc = grpcClient(SessionStoreService, server.address);
    const viaConnect = createClient(SessionStoreService, createConnectTransport({ baseUrl: `http://${server.connectAddress}`, httpVersion: "1.1", readMaxBytes: MAX_MESSAGE_BYTES, writeMaxBytes: MAX_MESSAGE_BYTES }));
    const viaWeb = createClient(SessionStoreService, createGrpcWebTransport({ baseUrl: `http://${server.connectAddress}`, httpVersion: "1.1" }));
    await viaGrpc.save({ sessionId: "shared", snapshot: snap(new TextEncoder().encode("from grpc")) });
    expect(new TextDecoder().decode((await viaConnect.load({ sessionId: "shared" })).snapshot!.payload)).toBe("from grpc");
    await viaConnect.save({ sessionId: "shared", snapshot: snap(new TextEncoder().encode("from connect")) });
    expect(new TextDecoder().decode((await viaWeb.load({ sessionId: "shared" })).snapshot!.payload)).toBe("from connect");
    expect(new TextDecoder().decode((await viaGrpc.load({ sessionId: "shared" })).snapshot!.payload)).toBe("from connect");
  });

  test("List answers the same entries on every protocol, byte for byte as protobuf-es encodes them, and in JSON (answers built as wire bytes, issue 10)", async () => {
    const viaGrpc = grpcClient(SessionStoreService, server.address);
    const ids = Array.from({ length: 300 }, (_, i) => `listed-${String(i).padStart(3, "0")}-${"é".repeat(i % 3)}`);
    await inParallel(ids, 16, (id) => viaGrpc.save({ sessionId: id, snapshot: snap(new TextEncoder().encode("{}")) }));
    const sessions = (await viaGrpc.list({})).sessions;
    expect(sessions.map((s) => s.sessionId).filter((id) => id.startsWith("listed-")).sort()).toEqual(ids);
    const expected = Buffer.from(toBinary(ListSessionsResponseSchema, create(ListSessionsResponseSchema, { sessions })));
    const post = (type: string, body: Uint8Array | string) => fetch(`http://${server.connectAddress}/${SessionStoreService.typeName}/List`, { method: "POST", headers: { "content-type": type }, body });
    const binary = await post("application/proto", new Uint8Array(0));
    expect(binary.status).toBe(200);
    expect(Buffer.from(await binary.arrayBuffer()).equals(expected)).toBe(true);
    const json = await post("application/json", "{}");
    expect(json.status).toBe(200);
    expect(fromJson(ListSessionsResponseSchema, (await json.json()) as JsonValue).sessions).toEqual(sessions);
    const viaWeb = createClient(SessionStoreService, createGrpcWebTransport({ baseUrl: `http://${server.connectAddress}`, httpVersion: "1.1", readMaxBytes: MAX_MESSAGE_BYTES }));
    expect((await viaWeb.list({})).sessions).toEqual(sessions);
    const raw = rawGrpcClient(SessionStoreService, server.address);
    expect((await rawUnary(raw, SessionStoreService.method.list, {})).sessions.map((s) => s.sessionId)).toEqual(sessions.map((s) => s.sessionId));
    raw.close();
  });

  test("the Connect listener answers plain JSON over HTTP/1.1 (curl-friendly)", async () => {
    const res = await fetch(`http://${server.connectAddress}/mecatl.driver.v1.SessionStoreService/Capabilities`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ contract: "session-store/1", list: true, delete: true, create: true });
  });

  test("Prometheus metrics count calls by method and code and show the durability mode", async () => {
    await grpcClient(SessionStoreService, server.address).load({ sessionId: "missing-for-metrics" }).catch(() => undefined);
    const text = await (await fetch(`http://${server.metricsAddress}/metrics`)).text();
    expect(text).toMatch(/mecatl_drivers_rpcs_total\{service="mecatl\.driver\.v1\.SessionStoreService",method="Save",code="OK"\} \d+/);
    expect(text).toMatch(/mecatl_drivers_rpcs_total\{[^}]*method="Load",code="NotFound"\} [1-9]/);
    expect(text).toContain('mecatl_drivers_durability{mode="full"} 1');
    expect(text).toContain('mecatl_drivers_backend_up{backend="sqlite"} 1');
  });
});

describe("unix socket listener", () => {
  test("serves gRPC on unix:/path", async () => {
    const path = join(mkdtempSync(join(tmpdir(), "mecatl-sock-")), "driver.sock");
    const server = await startServer(["session-store", "--store", "sqlite::memory:"], { listen: `unix:${path}` });
    try {
      expect(server.address).toBe(`unix:${path}`);
      const raw = rawGrpcClient(SessionStoreService, `unix:${path}`);
      await rawUnary(raw, SessionStoreService.method.save, { sessionId: "over-unix", snapshot: snap(new Uint8Array([1, 2, 3])) });
      expect([...(await rawUnary(raw, SessionStoreService.method.load, { sessionId: "over-unix" })).snapshot!.payload]).toEqual([1, 2, 3]);
      raw.close();
    } finally {
      await server.stop();
    }
  });
});
