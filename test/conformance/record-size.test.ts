import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Code, createClient, type Client } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { EventLogService } from "../../gen/mecatl/driver/v1/event_log_pb.js";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { ScheduleStoreService } from "../../gen/mecatl/driver/v1/schedule_store_pb.js";
import { readSchedule, scheduleRecord, ts } from "../helpers/schedules.js";
import { SCHEDULE_STATE_ROOM_BYTES } from "../../services/schedule-store/requests.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { grpcClient, MAX_MESSAGE_BYTES } from "../helpers/clients.js";
import { expectCode } from "../helpers/errors.js";
import { EVENT_FORMAT, type EventLogClient } from "../helpers/event-log.js";
import { SESSION_MEMORY_MIB } from "../../clients/transport.js";
import { conformanceBackends, type TestBackend } from "../helpers/backends.js";

/** The Go harness's send and receive limit (wire-contract.md section 1). */
const HARNESS_LIMIT = 64 * 1024 * 1024;

/** A JSON object payload of exactly `bytes` bytes. */
function jsonOf(bytes: number): Uint8Array {
  const text = `{"a":"${"x".repeat(bytes - 8)}"}`;
  expect(text.length).toBe(bytes);
  return new TextEncoder().encode(text);
}

/**
 * Appends to `id` an event and a gap whose ReadAfter answers would exceed the
 * harness's 64 MiB limit, and an event that fits only without its cursor (a
 * 16 KiB session id: the cursor alone takes about 22 KiB of the answer);
 * expects each INVALID_ARGUMENT naming its field, and neither log to hold
 * anything afterwards.
 */
async function expectOversizedAppendsRefused(events: EventLogClient, id: string): Promise<void> {
  await expectCode(events.append({ sessionId: id, event: { format: EVENT_FORMAT, payload: jsonOf(HARNESS_LIMIT) } }), Code.InvalidArgument, "event.payload");
  await expectCode(events.appendGap({ sessionId: id, reason: "r".repeat(HARNESS_LIMIT) }), Code.InvalidArgument, "reason");
  const longId = "L".repeat(16 * 1024);
  await expectCode(events.append({ sessionId: longId, event: { format: EVENT_FORMAT, payload: jsonOf(HARNESS_LIMIT - 16 * 1024) } }), Code.InvalidArgument, "event.payload");
  for (const s of [id, longId]) {
    const stored = [];
    for await (const r of events.readAfter({ sessionId: s })) stored.push(r);
    expect(stored).toEqual([]);
  }
}

/**
 * Every accepted record must come back within the harness's 64 MiB limit. A
 * server that stored whatever fit its own 65 MiB request limit acknowledged
 * snapshots the harness could never Load, and events whose ReadAfter answer
 * (the event plus its cursor) exceeded even the server's send limit, so every
 * reader stopped at them for ever.
 */
describe("record sizes against the harness's 64 MiB limit", () => {
  let server: ServerProcess;
  let events: EventLogClient;
  let sessions: Client<typeof SessionStoreService>;
  /** Clients that receive at most 64 MiB, as the harness does. */
  let harnessEvents: EventLogClient;
  let harnessSessions: Client<typeof SessionStoreService>;

  beforeAll(async () => {
    server = await startServer(["event-log", "session-store", "--store", "sqlite::memory:"]);
    events = grpcClient(EventLogService, server.address);
    sessions = grpcClient(SessionStoreService, server.address);
    const harness = createGrpcTransport({ baseUrl: `http://${server.address}`, readMaxBytes: HARNESS_LIMIT, writeMaxBytes: MAX_MESSAGE_BYTES, nodeOptions: { maxSessionMemory: SESSION_MEMORY_MIB } });
    harnessEvents = createClient(EventLogService, harness);
    harnessSessions = createClient(SessionStoreService, harness);
  });
  afterAll(async () => {
    await server?.stop();
  });

  test("a snapshot whose Load answer would exceed 64 MiB is INVALID_ARGUMENT and not stored; one just under is loadable", async () => {
    await expectCode(sessions.save({ sessionId: "size-snap", snapshot: { format: "sessnap-json/1", payload: jsonOf(HARNESS_LIMIT) } }), Code.InvalidArgument, "snapshot.payload");
    await expectCode(sessions.create({ sessionId: "size-snap", snapshot: { format: "sessnap-json/1", payload: jsonOf(HARNESS_LIMIT) } }), Code.InvalidArgument, "snapshot.payload");
    await expectCode(sessions.load({ sessionId: "size-snap" }), Code.NotFound);
    const fits = jsonOf(HARNESS_LIMIT - 64);
    await sessions.save({ sessionId: "size-snap", snapshot: { format: "sessnap-json/1", payload: fits } });
    expect((await harnessSessions.load({ sessionId: "size-snap" })).snapshot?.payload.byteLength).toBe(fits.byteLength);
  });

  test("an event or gap whose ReadAfter answer would exceed 64 MiB is INVALID_ARGUMENT and not appended; one just under is readable", async () => {
    const id = "size-events";
    await expectOversizedAppendsRefused(events, id);
    const fits = jsonOf(HARNESS_LIMIT - 1024);
    await events.append({ sessionId: id, event: { format: EVENT_FORMAT, payload: fits } });
    await events.append({ sessionId: id, event: { format: EVENT_FORMAT, payload: jsonOf(16) } });
    const sizes: number[] = [];
    for await (const r of harnessEvents.readAfter({ sessionId: id })) sizes.push(r.event!.payload.byteLength);
    expect(sizes).toEqual([fits.byteLength, 16]);
  });
});

// The refusals are the service's, before any store: the same on every backend, and nothing reaches the store; a schedule within the room is claimed and loaded through each store.
describe.each(conformanceBackends())("oversized appends and schedules on $name", (backend: TestBackend) => {
  let server: ServerProcess;
  beforeAll(async () => {
    const { store, args } = await backend.setup();
    server = await startServer(["event-log", "schedule-store", "--store", store, ...args]);
  });
  afterAll(async () => {
    await server?.stop();
    await backend.teardown();
  });

  test("an event or gap whose ReadAfter answer would exceed 64 MiB, its cursor counted, is INVALID_ARGUMENT and not appended", async () => {
    await expectOversizedAppendsRefused(grpcClient(EventLogService, server.address), "size-events");
  });

  test("a schedule that leaves its answers less than the room for claim state is INVALID_ARGUMENT and not stored; one within it is claimed and loaded by a 64 MiB reader", async () => {
    const schedules = grpcClient(ScheduleStoreService, server.address);
    const harnessSchedules = createClient(ScheduleStoreService, createGrpcTransport({ baseUrl: `http://${server.address}`, readMaxBytes: HARNESS_LIMIT, writeMaxBytes: MAX_MESSAGE_BYTES, nodeOptions: { maxSessionMemory: SESSION_MEMORY_MIB } }));
    const withPrompt = (name: string, bytes: number) => {
      const base = scheduleRecord({ Name: name, Prompt: "" }).payload.byteLength;
      return scheduleRecord({ Name: name, Prompt: "p".repeat(bytes - base) }, { Enabled: true, NextFireAt: "2026-01-01T00:00:00Z" });
    };
    // Before, this one was stored; its claim was applied, then answered "Sent message larger than max", and it could never be loaded.
    const tooBig = withPrompt("size-sched", HARNESS_LIMIT - SCHEDULE_STATE_ROOM_BYTES + 64);
    await expectCode(schedules.saveSchedule({ name: "size-sched", schedule: tooBig }), Code.InvalidArgument, "schedule.payload");
    await expectCode(schedules.loadSchedule({ name: "size-sched" }), Code.NotFound);
    const fits = withPrompt("size-sched", HARNESS_LIMIT - SCHEDULE_STATE_ROOM_BYTES - 64);
    await schedules.saveSchedule({ name: "size-sched", schedule: fits });
    const claimed = await harnessSchedules.claimScheduleNow({ name: "size-sched", now: ts(1_767_225_600, 123_456_789), nextFire: ts(1_767_229_200, 987_654_321) });
    expect(readSchedule(claimed.schedule).state.FireCount).toBe(1);
    expect((await harnessSchedules.loadSchedule({ name: "size-sched" })).schedule?.payload.byteLength).toBeGreaterThan(fits.payload.byteLength);
  });
});
