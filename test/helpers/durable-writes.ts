import { Code, ConnectError, type Client } from "@connectrpc/connect";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { EventLogService } from "../../gen/mecatl/driver/v1/event_log_pb.js";
import { SessionLeaseService } from "../../gen/mecatl/driver/v1/session_lease_pb.js";
import { ScheduleStoreService } from "../../gen/mecatl/driver/v1/schedule_store_pb.js";
import { grpcClient } from "./clients.js";
import { ev, readAfterAll } from "./event-log.js";
import { scheduleRecord } from "./schedules.js";

/** Typed clients of every service that writes, each on its own connection to one server. */
export interface WriteClients {
  sessions: Client<typeof SessionStoreService>;
  events: Client<typeof EventLogService>;
  leases: Client<typeof SessionLeaseService>;
  schedules: Client<typeof ScheduleStoreService>;
}

/** Opens {@link WriteClients} to a server serving all services at `address`. */
export function writeClients(address: string): WriteClients {
  return {
    sessions: grpcClient(SessionStoreService, address),
    events: grpcClient(EventLogService, address),
    leases: grpcClient(SessionLeaseService, address),
    schedules: grpcClient(ScheduleStoreService, address),
  };
}

/**
 * One kind of write RPC, keyed by a marker: `write` stores a record whose
 * key and stored bytes both contain `marker` (padded with `padBytes` filler
 * where the record has a payload), and `visible` tells whether it is in the
 * store. Durability tests run every kind (issue 15: OK means durable, for
 * every write).
 */
export interface WriteKind {
  name: string;
  write(c: WriteClients, marker: string, padBytes?: number): Promise<unknown>;
  visible(c: WriteClients, marker: string): Promise<boolean>;
}

/** True when `promise` resolves, false when it rejects with `absent` (any other error is rethrown). */
async function found(promise: Promise<unknown>, absent: Code): Promise<boolean> {
  try {
    await promise;
    return true;
  } catch (err) {
    if (err instanceof ConnectError && err.code === absent) return false;
    throw err;
  }
}

const text = (marker: string, padBytes = 0) => marker + "-".repeat(padBytes);

/** Save, a Save over 1 MiB, Create, Append, AppendGap, Acquire and SaveSchedule. */
export const WRITE_KINDS: readonly WriteKind[] = [
  {
    name: "Save",
    write: (c, m, pad) => c.sessions.save({ sessionId: m, snapshot: { format: "sessnap-json/1", payload: new TextEncoder().encode(text(m, pad)) } }),
    visible: (c, m) => found(c.sessions.load({ sessionId: m }), Code.NotFound),
  },
  {
    // Over 1 MiB: staged in chunks first, published by the Save (issue 11); the marker is in the first chunk.
    name: "Save over 1 MiB",
    write: (c, m, pad = 0) => c.sessions.save({ sessionId: m, snapshot: { format: "sessnap-json/1", payload: new TextEncoder().encode(text(m, pad + 1024 * 1024 + 1)) } }),
    visible: (c, m) => found(c.sessions.load({ sessionId: m }), Code.NotFound),
  },
  {
    name: "Create",
    write: (c, m, pad) => c.sessions.create({ sessionId: m, snapshot: { format: "sessnap-json/1", payload: new TextEncoder().encode(text(m, pad)) } }),
    visible: (c, m) => found(c.sessions.load({ sessionId: m }), Code.NotFound),
  },
  {
    name: "Append",
    write: (c, m, pad) => c.events.append({ sessionId: m, event: ev({ marker: text(m, pad) }) }),
    visible: async (c, m) => (await readAfterAll(c.events, { sessionId: m })).length > 0,
  },
  {
    name: "AppendGap",
    write: (c, m) => c.events.appendGap({ sessionId: m, reason: m }),
    visible: async (c, m) => (await readAfterAll(c.events, { sessionId: m })).length > 0,
  },
  {
    name: "Acquire",
    write: (c, m) => c.leases.acquire({ sessionId: m, owner: m }),
    // Another owner is refused only while the marker's lease exists (a probe that succeeds takes a lease: harmless here).
    visible: async (c, m) => !(await found(c.leases.acquire({ sessionId: m, owner: "visibility-probe" }), Code.FailedPrecondition)),
  },
  {
    name: "SaveSchedule",
    write: (c, m, pad) => c.schedules.saveSchedule({ name: m, schedule: scheduleRecord({ Name: m, Prompt: text(m, pad) }) }),
    visible: (c, m) => found(c.schedules.loadSchedule({ name: m }), Code.NotFound),
  },
];
