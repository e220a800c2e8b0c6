import { toJson } from "@bufbuild/protobuf";
import { SessionMetadataEntrySchema, SessionLineageEntrySchema } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import type { Lease } from "../../gen/mecatl/driver/v1/session_lease_pb.js";
import type { WriteClients } from "./durable-writes.js";
import { ev } from "./event-log.js";
import { fireRecord, scheduleRecord, T0, iso, ts } from "./schedules.js";
import { incarnationOf, newIncarnation, sessnap } from "./sessnap.js";

/** What {@link fillStore} wrote that a test needs to check a copy: ids, incarnations, cursors and leases. */
export interface Filled {
  sessionIds: string[];
  /** Roots whose lineage the contents read: (session id, incarnation), old incarnations included. */
  roots: Array<[string, string]>;
  /** Sessions with an event log, and the cursor after each record. */
  cursors: Map<string, string[]>;
  /** A lease still held (renewable on the copy) and the id of a released one. */
  held: Lease;
  releasedId: string;
  /** Highest token granted for `releasedId`. */
  releasedToken: bigint;
  scheduleNames: string[];
}

const FORMAT = "sessnap-json/1";

/**
 * Writes a little of everything a store holds, through a running server:
 * sessnap sessions with owners, relationships and activity, a non-sessnap
 * payload, one over 1 MiB, a session re-incarnated (a pruned lineage record) and one deleted
 * (a tombstone, its event log gone), event logs with a gap and a log without
 * a snapshot, a lease held, one released after a takeover (high-water 2),
 * schedules (one claimed, so its State moved) and fire records.
 */
export async function fillStore(c: WriteClients, prefix = "c"): Promise<Filled> {
  const owner = { Issuer: "https://issuer", Subject: `${prefix}-owner` };
  const rootInc = newIncarnation();
  const sessions = [
    { id: `${prefix}-root`, incarnation: rootInc, owner, title: "root", messages: [{ role: "user", text: "hello" }] },
    { id: `${prefix}-child`, kind: "subagent", relationship: { ParentSessionID: `${prefix}-root`, ParentIncarnation: rootInc, CallID: "call-1" }, owner },
    { id: `${prefix}-plain` },
    { id: `${prefix}-gone`, owner },
  ];
  for (const s of sessions) await c.sessions.save({ sessionId: s.id, snapshot: { format: FORMAT, payload: sessnap(s) }, activityState: s.id.endsWith("root") ? "active" : "" });
  await c.sessions.save({ sessionId: `${prefix}-raw`, snapshot: { format: FORMAT, payload: Buffer.from([0, 1, 2, 255, 254]) } });
  // Over 1 MiB, so kept in chunks (issue 11): SQLite's chunk rows, Redis's list of chunks.
  const large = Buffer.alloc(3 * 1024 * 1024 + 17, 0);
  for (let i = 0; i < large.length; i++) large[i] = (i * 31 + (i >> 20)) & 0xff;
  await c.sessions.save({ sessionId: `${prefix}-large`, snapshot: { format: FORMAT, payload: large } });
  const reinc = { id: `${prefix}-reinc`, owner };
  await c.sessions.save({ sessionId: reinc.id, snapshot: { format: FORMAT, payload: sessnap(reinc) } });
  const oldInc = incarnationOf((await c.sessions.load({ sessionId: reinc.id })).snapshot!.payload);
  await c.sessions.save({ sessionId: reinc.id, snapshot: { format: FORMAT, payload: sessnap(reinc) } });
  const newInc = incarnationOf((await c.sessions.load({ sessionId: reinc.id })).snapshot!.payload);

  const cursors = new Map<string, string[]>();
  const append = async (sessionId: string, n: number, gapAt = -1) => {
    const list = cursors.get(sessionId) ?? [];
    for (let i = 1; i <= n; i++) {
      const r = i === gapAt ? await c.events.appendGap({ sessionId, reason: "lost" }) : await c.events.append({ sessionId, event: ev({ seq: list.length + 1, text: "x".repeat(i * 37) }) });
      list.push(r.cursor);
    }
    cursors.set(sessionId, list);
  };
  await append(`${prefix}-root`, 12, 5);
  await append(`${prefix}-child`, 3);
  await append(`${prefix}-orphan-log`, 4);
  await append(`${prefix}-gone`, 2);
  await c.sessions.delete({ sessionId: `${prefix}-gone` });
  cursors.delete(`${prefix}-gone`);

  const held = (await c.leases.acquire({ sessionId: `${prefix}-root`, owner: "holder" })).lease!;
  const first = (await c.leases.acquire({ sessionId: `${prefix}-free`, owner: "a" })).lease!;
  await c.leases.release({ lease: first });
  const second = (await c.leases.acquire({ sessionId: `${prefix}-free`, owner: "b" })).lease!;
  await c.leases.release({ lease: second });

  const names = [`${prefix}-nightly`, `${prefix}-owned`];
  await c.schedules.saveSchedule({ name: names[0], schedule: scheduleRecord({ Name: names[0]!, Prompt: "nightly \u00e9" }, { Enabled: true, NextFireAt: iso(T0, 123_456_789) }) });
  await c.schedules.saveSchedule({ name: names[1], schedule: scheduleRecord({ Name: names[1]!, PlacementOwned: true, MaxFires: 3 }, { Enabled: true, NextFireAt: iso(T0) }) });
  await c.schedules.claimScheduleNow({ name: names[0], now: ts(T0 + 1), nextFire: ts(T0 + 3600, 5) });
  for (const id of [`${prefix}-fire-1`, `${prefix}-fire-2`]) {
    await c.schedules.recordFire({ fireId: id, fire: fireRecord({ ID: id, ScheduleName: names[0]!, SessionID: `${prefix}-root`, FiredAt: iso(T0 + 1) }) });
  }
  return {
    sessionIds: [...sessions.map((s) => s.id).filter((id) => !id.endsWith("gone")), `${prefix}-raw`, `${prefix}-large`, reinc.id],
    roots: [
      [`${prefix}-root`, rootInc],
      [reinc.id, oldInc],
      [reinc.id, newInc],
    ],
    cursors,
    held,
    releasedId: `${prefix}-free`,
    releasedToken: second.token,
    scheduleNames: names,
  };
}

/**
 * Everything the server shows of what {@link fillStore} wrote, through the
 * RPCs, in comparable form (bytes as base64, protobuf messages as JSON): List
 * with save times, every snapshot, every PageMetadata row, the lineage of
 * every root, every log with its cursors, every schedule and fire record as
 * stored. Two stores with equal contents give equal values.
 */
export async function readContents(c: WriteClients, filled: Filled): Promise<Record<string, unknown>> {
  const list = (await c.sessions.list({})).sessions.map((s) => [s.sessionId, String(s.modifiedAt?.seconds), s.modifiedAt?.nanos]).sort();
  const snapshots: Record<string, unknown> = {};
  for (const id of filled.sessionIds) {
    const s = (await c.sessions.load({ sessionId: id })).snapshot!;
    snapshots[id] = [s.format, Buffer.from(s.payload).toString("base64")];
  }
  const page = (await c.sessions.pageMetadata({ limit: 1000 })).sessions.map((e) => toJson(SessionMetadataEntrySchema, e));
  const lineage: Record<string, unknown> = {};
  for (const [id, inc] of filled.roots) {
    lineage[`${id}/${inc}`] = (await c.sessions.readLineage({ rootSessionId: id, rootIncarnation: inc, limit: 256 })).records.map((r) => toJson(SessionLineageEntrySchema, r));
  }
  const logs: Record<string, unknown> = {};
  for (const id of filled.cursors.keys()) {
    const records: unknown[] = [];
    for await (const r of c.events.readAfter({ sessionId: id })) records.push([r.kind, r.cursor, r.event === undefined ? r.gapReason : [r.event.format, Buffer.from(r.event.payload).toString("base64")]]);
    logs[id] = records;
  }
  const schedules: Record<string, unknown> = {};
  for (const name of filled.scheduleNames) {
    const s = (await c.schedules.loadSchedule({ name })).schedule!;
    const fires = (await c.schedules.listFires({ scheduleName: name })).fires.map((f) => [f.format, Buffer.from(f.payload).toString("utf8")]).sort();
    schedules[name] = [s.format, Buffer.from(s.payload).toString("utf8"), fires];
  }
  return { list, snapshots, page, lineage, logs, schedules };
}
