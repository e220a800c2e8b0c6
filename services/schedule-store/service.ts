import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import {
  DueSchedulesResponseSchema,
  ListFiresResponseSchema,
  ListSchedulesResponseSchema,
  ScheduleFireRecordSchema,
  ScheduleOneShotReArmerService,
  ScheduleRecordSchema,
  ScheduleStoreService,
  type ClaimScheduleNowRequest,
  type ClaimScheduleRequest,
} from "../../gen/mecatl/driver/v1/schedule_store_pb.js";
import { encodeAnswer } from "../rpc/answer-budget.js";
import { notFound } from "../rpc/errors.js";
import { mapEntries } from "../storage/index-scan.js";
import { optionalTime, requireTime, validFireRecord, validScheduleRecord } from "./requests.js";
import { requireId } from "../rpc/validate.js";
import { formatRfc3339 } from "../json/rfc3339.js";
import type { RuleError, ScheduleMutation } from "./rules.js";
import { encodeSchedule, SCHEDULE_FORMAT_V1, scheduleFormat, type ScheduleDocument } from "./schedule.js";
import type { ScheduleStore, StoreReply } from "./store.js";

const utf8 = new TextEncoder();

/** A schedule as the wire carries it: format derived from `Spec.PlacementOwned`, payload re-encoded (section 5.3). */
function toRecord(s: ScheduleDocument) {
  return { format: scheduleFormat(s.placementOwned), payload: utf8.encode(encodeSchedule(s.specText, s.state)) };
}

/** A fire record as the wire carries it: always `schedule-json/1`, payload as stored. */
function toFireRecord(text: string) {
  return { format: SCHEDULE_FORMAT_V1, payload: utf8.encode(text) };
}

const q = (s: string) => JSON.stringify(s);

/** Default status message per refusal, for schedule `name`. */
function refusal(error: RuleError | "contended", name: string): ConnectError {
  switch (error) {
    case "not_found":
      return notFound(`schedule ${q(name)} not found`);
    case "deletion_pending":
      return new ConnectError(`schedule ${q(name)} has a deletion pending`, Code.Aborted);
    case "active_fire":
      return new ConnectError(`schedule ${q(name)} has a claimed or running fire`, Code.FailedPrecondition);
    case "retries_exhausted":
      return new ConnectError(`schedule ${q(name)} cannot be re-armed: OneShotRetryCount is already 2^63 - 1`, Code.ResourceExhausted);
    case "contended":
      return new ConnectError(`schedule ${q(name)} is being changed by too many writers at once; retry`, Code.Unavailable);
  }
}

/**
 * Runs one mutation and maps a refusal to its status (section 5.6):
 * NOT_FOUND, ABORTED (deletion pending), FAILED_PRECONDITION (active fire),
 * RESOURCE_EXHAUSTED (retry count at its limit), UNAVAILABLE (Redis commit
 * contention). `override` replaces the default
 * error for one refusal kind.
 *
 * @returns the schedule the rule returned, if any.
 */
async function run(store: ScheduleStore, m: ScheduleMutation, name: string, override?: Partial<Record<RuleError, ConnectError>>): Promise<ScheduleDocument | undefined> {
  const reply: StoreReply = await store.mutate(m);
  if (reply.ok) return reply.schedule;
  throw (reply.error !== "contended" ? override?.[reply.error] : undefined) ?? refusal(reply.error, name);
}

/** Like {@link run} for rules that always return the schedule on OK (claims, begin-delete). */
async function runForSchedule(store: ScheduleStore, m: ScheduleMutation, name: string, override?: Partial<Record<RuleError, ConnectError>>) {
  const s = await run(store, m, name, override);
  if (s === undefined) throw new Error(`rule ${m.kind} answered OK without a schedule`);
  return { schedule: toRecord(s) };
}

/** ClaimSchedule (`checkDue`) and ClaimScheduleNow: name and now required, next_fire optional. */
function claim(store: ScheduleStore, req: ClaimScheduleRequest | ClaimScheduleNowRequest, checkDue: boolean) {
  const name = requireId("name", req.name);
  const now = requireTime("now", req.now);
  const gone = notFound(
    `schedule ${q(name)} cannot be claimed at ${formatRfc3339(now)}: unknown, disabled, deleting, out of fires, ` +
      (checkDue ? "not due, or this slot was already claimed" : "or already claimed at this instant"),
  );
  return runForSchedule(store, { kind: "claim", name, now, nextFire: optionalTime("next_fire", req.nextFire), checkDue }, name, { not_found: gone });
}

/**
 * ScheduleStoreService over a {@link ScheduleStore} (wire-contract.md
 * section 5). Validation (requests.ts) precedes any storage access; the
 * rules are rules.ts's. Status codes:
 * - INVALID_ARGUMENT: blank name / fire_id / deletion_id / schedule_name,
 *   missing now / at, malformed envelope or JSON (section 8.14 tables).
 * - NOT_FOUND: unknown schedule or fire; a claim whose slot is gone.
 * - ABORTED: deletion pending (Save, Delete, SetEnabled, CompleteDelete with
 *   another id).
 * - FAILED_PRECONDITION: BeginScheduleDelete with a claimed or running fire.
 * - RESOURCE_EXHAUSTED: ReArmOneShot when OneShotRetryCount is 2^63 - 1
 *   (a claim when FireCount is 2^63 - 1 is NOT_FOUND: out of fires).
 * - UNAVAILABLE: Redis commit contention persisted (nothing written).
 * - RESOURCE_EXHAUSTED: the answer of ListSchedules, DueSchedules or
 *   ListFires would exceed the harness's 64 MiB message limit; the message
 *   names the count and the limit (issue 10). These read their index in
 *   bounded pages and stop at the limit.
 */
export function scheduleStoreService(store: ScheduleStore): ServiceImpl<typeof ScheduleStoreService> {
  return {
    async saveSchedule(req) {
      const name = requireId("name", req.name);
      await run(store, { kind: "save", schedule: validScheduleRecord(name, req.schedule) }, name);
      return {};
    },
    async loadSchedule(req) {
      const name = requireId("name", req.name);
      const s = await store.load(name);
      if (s === undefined) throw notFound(`schedule ${q(name)} not found`);
      return { schedule: toRecord(s) };
    },
    async deleteSchedule(req) {
      const name = requireId("name", req.name);
      await run(store, { kind: "delete", name }, name);
      return {};
    },
    async listSchedules(_req, context) {
      const scan = store.scan();
      return encodeAnswer(ListSchedulesResponseSchema, ScheduleRecordSchema, mapEntries(scan, toRecord), { rpc: "ListSchedules", noun: "schedules", total: () => scan.total() }, context.signal);
    },
    async dueSchedules(req, context) {
      const now = requireTime("now", req.now);
      return encodeAnswer(DueSchedulesResponseSchema, ScheduleRecordSchema, mapEntries(store.scanDue(now), toRecord), { rpc: "DueSchedules", noun: "due schedules" }, context.signal);
    },
    claimSchedule: (req) => claim(store, req, true),
    claimScheduleNow: (req) => claim(store, req, false),
    async setScheduleEnabled(req) {
      const name = requireId("name", req.name);
      await run(store, { kind: "setEnabled", name, enabled: req.enabled }, name);
      return {};
    },
    async beginScheduleDelete(req) {
      const name = requireId("name", req.name);
      const deletionId = requireId("deletion_id", req.deletionId);
      return runForSchedule(store, { kind: "beginDelete", name, deletionId }, name);
    },
    async completeScheduleDelete(req) {
      const name = requireId("name", req.name);
      const deletionId = requireId("deletion_id", req.deletionId);
      const notMarked = new ConnectError(`schedule ${q(name)} is not being deleted under deletion_id ${q(deletionId)}`, Code.Aborted);
      await run(store, { kind: "completeDelete", name, deletionId }, name, { deletion_pending: notMarked });
      return {};
    },
    async recordFire(req) {
      const fireId = requireId("fire_id", req.fireId);
      const fire = validFireRecord(fireId, req.fire);
      await run(store, { kind: "recordFire", fire }, fire.scheduleName);
      return {};
    },
    async recordFireStart(req) {
      const name = requireId("name", req.name);
      const fireId = requireId("fire_id", req.fireId);
      await run(store, { kind: "recordFireStart", name, fire: validFireRecord(fireId, req.fire) }, name);
      return {};
    },
    async recordFireProgress(req) {
      const name = requireId("name", req.name);
      const fireId = requireId("fire_id", req.fireId);
      await run(store, { kind: "recordFireProgress", name, fireId, at: requireTime("at", req.at) }, name);
      return {};
    },
    async loadFire(req) {
      const fireId = requireId("fire_id", req.fireId);
      const text = await store.loadFire(fireId);
      if (text === undefined) throw notFound(`fire ${q(fireId)} not found`);
      return { fire: toFireRecord(text) };
    },
    async listFires(req, context) {
      const name = requireId("schedule_name", req.scheduleName);
      const scan = await store.scanFires(name);
      if (scan === undefined) throw notFound(`schedule ${q(name)} not found`);
      return encodeAnswer(ListFiresResponseSchema, ScheduleFireRecordSchema, mapEntries(scan, toFireRecord), { rpc: "ListFires", noun: "fires", total: () => scan.total() }, context.signal);
    },
  };
}

/**
 * ScheduleOneShotReArmerService (section 5.5 ReArmOneShot): INVALID_ARGUMENT
 * for a blank name or missing next_fire, NOT_FOUND for an unknown schedule,
 * ABORTED while a deletion is pending, RESOURCE_EXHAUSTED when
 * OneShotRetryCount is already 2^63 - 1; otherwise enabled, NextFireAt set and
 * OneShotRetryCount + 1, atomically.
 */
export function scheduleReArmerService(store: ScheduleStore): ServiceImpl<typeof ScheduleOneShotReArmerService> {
  return {
    async reArmOneShot(req) {
      const name = requireId("name", req.name);
      await run(store, { kind: "reArmOneShot", name, nextFire: requireTime("next_fire", req.nextFire) }, name);
      return {};
    },
  };
}
