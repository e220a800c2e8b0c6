import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { request } from "node:http";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { AppendRequestSchema, AppendResponseSchema, EventLogService } from "../../gen/mecatl/driver/v1/event_log_pb.js";
import { SaveRequestSchema, SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { grpcClient } from "../helpers/clients.js";
import { ev } from "../helpers/event-log.js";
import { metricValue } from "../helpers/metrics.js";
import { waitFor } from "../helpers/wait.js";

/** Posts `body` chunked (no content-length, 16 KiB pieces) to the Connect listener over HTTP/1.1; resolves with the status, headers and body. */
function postChunked(address: string, path: string, contentType: string, body: Buffer): Promise<{ status: number; headers: Record<string, unknown>; body: Buffer; ms: number }> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = request(`http://${address}${path}`, { method: "POST", headers: { "content-type": contentType } }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks), ms: performance.now() - started }));
    });
    req.on("error", reject);
    for (let at = 0; at < body.length; at += 16 * 1024) req.write(body.subarray(at, at + 16 * 1024));
    req.end();
  });
}

/** A gRPC-Web or gRPC message frame: flag 0, a 4-byte big-endian length, the bytes. */
function framed(message: Uint8Array): Buffer {
  const prefix = Buffer.alloc(5);
  prefix.writeUInt32BE(message.length, 1);
  return Buffer.concat([prefix, message]);
}

/**
 * A write's answer is never refused for lack of in-flight budget once the
 * write ran (inflight-budget.ts `takeAnswer`): a fresh-eyes run of the tenth
 * session saw a chunked Append of 300,000 bytes under --max-inflight-bytes 1MB
 * stored, then answered RESOURCE_EXHAUSTED "retry later" after 2 s (its
 * request held a third of the budget, all of it at 3 copies, and its 81-byte
 * answer waited for room): a caller that retried appended the event twice.
 */
describe("a write's answer after the write ran, under a full in-flight budget (--max-inflight-bytes 1MB)", () => {
  let server: ServerProcess;
  beforeAll(async () => {
    server = await startServer(["event-log", "session-store", "--store", "sqlite::memory:", "--max-inflight-bytes", "1MB", "--metrics-listen", "127.0.0.1:0", "--connect-listen", "127.0.0.1:0"]);
  });
  afterAll(async () => {
    await server?.stop();
  });

  test("a chunked Connect Append within a third of the budget is answered OK with its cursor, at once, and stored once", async () => {
    const message = toBinary(AppendRequestSchema, create(AppendRequestSchema, { sessionId: "full-budget", event: ev({ seq: 1, pad: "x".repeat(299_000) }) }));
    expect(message.length).toBeGreaterThan(262_144);
    expect(message.length).toBeLessThan(349_525);
    const answer = await postChunked(server.connectAddress!, `/${EventLogService.typeName}/Append`, "application/proto", Buffer.from(message));
    expect(answer.status).toBe(200);
    expect(fromBinary(AppendResponseSchema, answer.body).cursor).not.toBe("");
    // Not the budget's 2 s wait (a bound on a hang, far above the time the call takes).
    expect(answer.ms).toBeLessThan(1_500);
    const records = [];
    for await (const r of grpcClient(EventLogService, server.address).read({ sessionId: "full-budget" })) records.push(r);
    expect(records).toHaveLength(1);
    await waitFor(async () => (await metricValue(server.metricsAddress!, "mecatl_drivers_inflight_bytes")) === 0, 5_000, "the budget to be given back");
  });

  test("a chunked gRPC-Web Save within a third of the budget is answered grpc-status 0 at once", async () => {
    const message = toBinary(SaveRequestSchema, create(SaveRequestSchema, { sessionId: "full-budget-save", snapshot: { format: "sessnap-json/1", payload: Buffer.from(`{"a":"${"y".repeat(299_000)}"}`) } }));
    const answer = await postChunked(server.connectAddress!, `/${SessionStoreService.typeName}/Save`, "application/grpc-web+proto", framed(message));
    expect(answer.status).toBe(200);
    expect(answer.body.toString("latin1")).toMatch(/grpc-status: ?0\r\n/);
    expect(answer.ms).toBeLessThan(1_500);
    const saved = await grpcClient(SessionStoreService, server.address).load({ sessionId: "full-budget-save" });
    expect(saved.snapshot?.payload.length).toBe(299_000 + 8);
  });
});
