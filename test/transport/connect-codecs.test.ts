import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { gzipSync } from "node:zlib";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { EventLogService } from "../../gen/mecatl/driver/v1/event_log_pb.js";
import { ScheduleStoreService } from "../../gen/mecatl/driver/v1/schedule_store_pb.js";
import { readSchedule, scheduleRecord } from "../helpers/schedules.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { grpcClient } from "../helpers/clients.js";
import { allBackends, type TestBackend } from "../helpers/backends.js";

/**
 * The Connect listener answers bad request bytes and oversized JSON as the
 * gRPC listener would (issue 10 deliverables 4 and 5; found by a fresh-eyes
 * review): request bytes that are no valid message are INVALID_ARGUMENT
 * naming the field (connect-es alone answers INTERNAL "parse binary"), in
 * every framing (Connect unary, gzip-compressed, Connect streaming,
 * gRPC-Web), and store nothing; JSON messages are limited to 1 MiB
 * (services/server/connect-request-check.ts JSON_MESSAGE_BYTES), because
 * protobuf-es writes their `bytes` fields as base64 on the event loop. On
 * every backend: what a refusal leaves stored is the store's.
 */
describe.each(allBackends())("the Connect listener's codecs, on $name", (backend: TestBackend) => {
  let server: ServerProcess;
  let url: (service: string, method: string) => string;
  const MiB = 1024 * 1024;
  beforeAll(async () => {
    const { store, args } = await backend.setup();
    server = await startServer(["--store", store, "--connect-listen", "127.0.0.1:0", ...args]);
    url = (service, method) => `http://${server.connectAddress}/mecatl.driver.v1.${service}/${method}`;
  });
  afterAll(async () => {
    await server?.stop();
    await backend.teardown();
  });

  const post = async (path: string, body: Uint8Array | string, headers: Record<string, string>) => {
    const res = await fetch(path, { method: "POST", body, headers });
    return { status: res.status, headers: res.headers, body: Buffer.from(await res.arrayBuffer()) };
  };
  /** A gRPC-style envelope: flags, 4-byte big-endian length, the message. */
  const envelope = (message: Uint8Array, flags = 0) => Buffer.concat([Buffer.from([flags, ...[24, 16, 8, 0].map((s) => (message.length >>> s) & 0xff)]), message]);
  /** Load's session_id (field 1) as the bytes ff fe: not UTF-8. */
  const badUtf8 = Buffer.from([0x0a, 0x02, 0xff, 0xfe]);

  test.each([
    ["application/proto", {}, Buffer.from([0, 0, 0]), "request: malformed field tag at byte 0"],
    ["application/proto", {}, badUtf8, "session_id: not valid UTF-8"],
    ["application/proto", { "content-encoding": "gzip" }, gzipSync(badUtf8), "session_id: not valid UTF-8"],
    ["application/proto", {}, Buffer.from([0x0a, 0x05, 0x61]), "session_id: its length runs past the end of the message"],
  ])("Connect unary %s %j: INVALID_ARGUMENT naming the field", async (type, extra, body, message) => {
    const got = await post(url("SessionStoreService", "Load"), body, { "content-type": type, ...extra });
    expect(got.status).toBe(400);
    expect(JSON.parse(got.body.toString())).toEqual({ code: "invalid_argument", message });
  });

  /** A JSON text with the bytes ff fe where `at` stands in `template`: not UTF-8. */
  const badJson = (template: string, at = "@") => {
    const [before, after] = template.split(at);
    return Buffer.concat([Buffer.from(before!, "utf8"), Buffer.from([0xff, 0xfe]), Buffer.from(after!, "utf8")]);
  };
  const sessnapPayload = Buffer.from(JSON.stringify({ id: "json-utf8" })).toString("base64");
  test.each([
    ["session_id", "application/json", {}, "Save", badJson(`{"sessionId":"json-@","snapshot":{"format":"sessnap-json/1","payload":"${sessnapPayload}"}}`)],
    ["session_id (proto name as the key)", "application/json", {}, "Save", badJson(`{"session_id":"json-@","snapshot":{"format":"sessnap-json/1","payload":"${sessnapPayload}"}}`)],
    ["snapshot.format", "application/json", {}, "Save", badJson(`{"sessionId":"json-utf8","snapshot":{"format":"sessnap-json/1@","payload":"${sessnapPayload}"}}`)],
    ["session_id", "application/json", { "content-encoding": "gzip" }, "Save", gzipSync(badJson(`{"sessionId":"json-@","snapshot":{"format":"sessnap-json/1","payload":"${sessnapPayload}"}}`))],
  ])("Connect unary JSON with invalid UTF-8 in %s (%s %j): INVALID_ARGUMENT naming the field, nothing stored", async (field, type, extra, method, body) => {
    const got = await post(url("SessionStoreService", method), body, { "content-type": type, ...extra });
    expect(got.status).toBe(400);
    expect(JSON.parse(got.body.toString())).toEqual({ code: "invalid_argument", message: `${field.split(" ")[0]}: not valid UTF-8` });
    expect((await grpcClient(SessionStoreService, server.address).list({})).sessions.map((s) => s.sessionId).filter((id) => id.startsWith("json-"))).toEqual([]);
  });

  test("invalid UTF-8 in a JSON key is INVALID_ARGUMENT too; so is JSON whose bad bytes are in no string", async () => {
    const inKey = await post(url("SessionStoreService", "Load"), badJson(`{"session@Id":"x"}`), { "content-type": "application/json" });
    expect(JSON.parse(inKey.body.toString())).toEqual({ code: "invalid_argument", message: "session\ufffd\ufffdId: not valid UTF-8" });
    const outside = await post(url("SessionStoreService", "Load"), badJson(`{"sessionId":"x"}@`), { "content-type": "application/json" });
    expect(JSON.parse(outside.body.toString())).toEqual({ code: "invalid_argument", message: "request: not valid UTF-8" });
  });

  test.each([
    ["a number for a string", "Load", `{"sessionId":123}`, /^session_id: cannot be read from JSON \(expected string, got 123\)$/],
    ["an escaped lone surrogate", "Load", `{"sessionId":"\\ud800"}`, /^session_id: cannot be read from JSON \(expected string: invalid UTF8\)$/],
    ["a nested field of the wrong type", "Save", `{"sessionId":"json-typed","snapshot":{"format":5,"payload":"${sessnapPayload}"}}`, /^snapshot\.format: cannot be read from JSON \(expected string, got 5\)$/],
    ["bytes that are no base64", "Save", `{"sessionId":"json-typed","snapshot":{"format":"sessnap-json/1","payload":"%%%"}}`, /^snapshot\.payload: cannot be read from JSON \(invalid base64 string\)$/],
    ["text that is no JSON", "Load", "not json", /^request: cannot be read from JSON \(.+\)$/],
    ["an array for the request", "Load", "[1]", /^request: cannot be read from JSON \(.+\)$/],
  ])("Connect unary JSON with %s: INVALID_ARGUMENT naming the field first (protobuf-es names it last, by its type), nothing stored", async (_what, method, body, message) => {
    const got = await post(url("SessionStoreService", method), body, { "content-type": "application/json" });
    expect(got.status).toBe(400);
    const answer = JSON.parse(got.body.toString()) as { code: string; message: string };
    expect(answer.code).toBe("invalid_argument");
    expect(answer.message).toMatch(message);
    expect((await grpcClient(SessionStoreService, server.address).list({})).sessions.map((s) => s.sessionId)).not.toContain("json-typed");
  });

  test("of two Timestamp fields, the one that cannot be read is named (protobuf-es names only the type)", async () => {
    const claim = (body: unknown) => post(url("ScheduleStoreService", "ClaimSchedule"), JSON.stringify(body), { "content-type": "application/json" });
    const bad = async (body: unknown) => (JSON.parse((await claim(body)).body.toString()) as { message: string }).message;
    expect(await bad({ name: "x", now: "2026-01-01T00:00:00Z", nextFire: "bad" })).toBe("next_fire: cannot be read from JSON (invalid RFC 3339 string)");
    expect(await bad({ name: "x", now: "bad", nextFire: "2026-01-01T00:00:00Z" })).toBe("now: cannot be read from JSON (invalid RFC 3339 string)");
    expect(await bad({ name: "x", now: "2026-01-01T00:00:00Z", next_fire: true })).toMatch(/^next_fire: cannot be read from JSON \(/);
  });

  test("a JSON text that starts with a byte-order mark is read as connect-es reads it (the mark dropped)", async () => {
    const payload = Buffer.from(JSON.stringify({ id: "json-bom" })).toString("base64");
    const body = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(JSON.stringify({ sessionId: "json-bom", snapshot: { format: "sessnap-json/1", payload } }))]);
    const got = await post(url("SessionStoreService", "Save"), body, { "content-type": "application/json" });
    expect(got.status, got.body.toString()).toBe(200);
    expect((await grpcClient(SessionStoreService, server.address).load({ sessionId: "json-bom" })).snapshot?.format).toBe("sessnap-json/1");
  });

  test("a JSON key the message does not have is still ignored, as connect-es ignores it; streaming JSON of the wrong type names the field", async () => {
    const unknownKey = await post(url("SessionStoreService", "Load"), `{"sessionId":"json-none","notAField":1}`, { "content-type": "application/json" });
    expect(JSON.parse(unknownKey.body.toString()).code).toBe("not_found");
    const streamed = await post(url("EventLogService", "ReadAfter"), envelope(Buffer.from(`{"sessionId":"e","follow":"yes"}`)), { "content-type": "application/connect+json" });
    expect(JSON.parse(streamed.body.subarray(5).toString()).error).toEqual({ code: "invalid_argument", message: 'follow: cannot be read from JSON (expected boolean, got "yes")' });
  });

  test("Connect streaming JSON (ReadAfter) with invalid UTF-8: the end-of-stream message is invalid_argument naming the field", async () => {
    const got = await post(url("EventLogService", "ReadAfter"), envelope(badJson(`{"sessionId":"e@"}`)), { "content-type": "application/connect+json" });
    expect(got.status).toBe(200);
    expect(JSON.parse(got.body.subarray(5).toString()).error).toEqual({ code: "invalid_argument", message: "session_id: not valid UTF-8" });
  });

  test("gRPC-Web: grpc-status 3 naming the field", async () => {
    const got = await post(url("SessionStoreService", "Load"), envelope(badUtf8), { "content-type": "application/grpc-web+proto" });
    const trailer = got.body.toString("latin1");
    expect(got.headers.get("grpc-status") ?? /grpc-status: ?(\d+)/.exec(trailer)?.[1]).toBe("3");
    expect(decodeURIComponent(got.headers.get("grpc-message") ?? /grpc-message: ?([^\r\n]*)/.exec(trailer)?.[1] ?? "")).toBe("session_id: not valid UTF-8");
  });

  test("Connect streaming (ReadAfter): the end-of-stream message is invalid_argument naming the field", async () => {
    const got = await post(url("EventLogService", "ReadAfter"), envelope(badUtf8), { "content-type": "application/connect+proto" });
    expect(got.status).toBe(200);
    const end = got.body.subarray(5);
    expect(got.body[0]! & 0x02).toBe(0x02);
    expect(JSON.parse(end.toString()).error).toEqual({ code: "invalid_argument", message: "session_id: not valid UTF-8" });
  });

  test("a malformed Save stores nothing", async () => {
    // session_id "x", then snapshot (field 2) whose length runs past the end.
    const got = await post(url("SessionStoreService", "Save"), Buffer.from([0x0a, 0x01, 0x78, 0x12, 0x7f, 0x0a]), { "content-type": "application/proto" });
    expect(JSON.parse(got.body.toString()).code).toBe("invalid_argument");
    expect((await grpcClient(SessionStoreService, server.address).list({})).sessions.map((s) => s.sessionId)).not.toContain("x");
  });

  test("a JSON answer over 1 MiB in protobuf is RESOURCE_EXHAUSTED naming the size and the limit; binary callers get it; one under 1 MiB is served in JSON", async () => {
    const grpc = grpcClient(SessionStoreService, server.address);
    const payload = (id: string, n: number) => new TextEncoder().encode(JSON.stringify({ id, x: "a".repeat(n) }));
    await grpc.save({ sessionId: "json-big", snapshot: { format: "sessnap-json/1", payload: payload("json-big", 1.5 * MiB) } });
    await grpc.save({ sessionId: "json-small", snapshot: { format: "sessnap-json/1", payload: payload("json-small", 0.9 * MiB) } });
    const big = await post(url("SessionStoreService", "Load"), JSON.stringify({ sessionId: "json-big" }), { "content-type": "application/json" });
    expect(big.status).toBe(429);
    const refusal = JSON.parse(big.body.toString()) as { code: string; message: string };
    expect(refusal.code).toBe("resource_exhausted");
    expect(refusal.message).toMatch(/^SessionStoreService\.Load: the answer is \d+ bytes in protobuf, more than the 1048576 bytes a JSON answer may be/);
    const binary = await post(url("SessionStoreService", "Load"), Buffer.from([0x0a, 0x08, ...Buffer.from("json-big")]), { "content-type": "application/proto" });
    expect(binary.status).toBe(200);
    expect(binary.body.length).toBeGreaterThan(1.5 * MiB);
    const small = await post(url("SessionStoreService", "Load"), JSON.stringify({ sessionId: "json-small" }), { "content-type": "application/json" });
    expect(small.status).toBe(200);
    expect(Buffer.from((JSON.parse(small.body.toString()) as { snapshot: { payload: string } }).snapshot.payload, "base64").length).toBe(payload("json-small", 0.9 * MiB).length);
  });

  test("a write's JSON answer over 1 MiB is given, not refused: ClaimScheduleNow of a 1.5 MB schedule is applied once and answered 200 (it was applied, then answered 429)", async () => {
    const schedules = grpcClient(ScheduleStoreService, server.address);
    const name = "json-big-claim";
    await schedules.saveSchedule({ name, schedule: scheduleRecord({ Name: name, Prompt: "p".repeat(1.5 * MiB) }, { Enabled: true, NextFireAt: "2026-01-01T00:00:00Z" }) });
    const got = await post(url("ScheduleStoreService", "ClaimScheduleNow"), JSON.stringify({ name, now: "2026-12-07T00:00:00Z", nextFire: "2026-12-07T01:00:00Z" }), { "content-type": "application/json" });
    expect(got.status).toBe(200);
    const answered = JSON.parse(got.body.toString()) as { schedule: { format: string; payload: string } };
    const claimed = readSchedule({ format: answered.schedule.format, payload: Buffer.from(answered.schedule.payload, "base64") });
    expect(claimed.state.FireCount).toBe(1);
    expect(readSchedule((await schedules.loadSchedule({ name })).schedule).state.FireCount).toBe(1);
  });

  test("a JSON request over 1 MiB is RESOURCE_EXHAUSTED and stores nothing", async () => {
    const body = JSON.stringify({ sessionId: "json-req", snapshot: { format: "sessnap-json/1", payload: Buffer.from(JSON.stringify({ x: "a".repeat(MiB) })).toString("base64") } });
    const got = await post(url("SessionStoreService", "Save"), body, { "content-type": "application/json" });
    expect(got.status).toBe(429);
    expect(JSON.parse(got.body.toString())).toEqual({ code: "resource_exhausted", message: expect.stringMatching(/^request: a JSON request may be at most 1048576 bytes on this listener, and this one has \d+ or more; /) });
    await expect(grpcClient(SessionStoreService, server.address).load({ sessionId: "json-req" })).rejects.toMatchObject({ code: 5 });
  });
});
