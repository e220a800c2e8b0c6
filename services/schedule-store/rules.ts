/**
 * The schedule store's transition rules (wire-contract.md section 5.5) as pure
 * functions: the stored schedule (and fire record) in, the reply and the
 * records to write out. Each backend applies {@link applyMutation} atomically
 * per schedule: SQLite inside one write operation on its worker thread, Redis
 * by re-running it until a version-checked commit succeeds. Nothing here does
 * I/O, and every value is structured-clone friendly.
 */
import { floorDiv, ZERO_TIME_NANOS } from "../json/rfc3339.js";
import { INT64_MAX, PENDING_FIRE_SESSION_ID, withFireProgress, type FireDocument, type ScheduleDocument, type ScheduleState } from "./schedule.js";

/**
 * Why a rule refused (section 5.6 maps them): `not_found` -> NOT_FOUND,
 * `deletion_pending` -> ABORTED, `active_fire` -> FAILED_PRECONDITION,
 * `retries_exhausted` -> RESOURCE_EXHAUSTED (OneShotRetryCount cannot grow
 * past a Go int; issue 10).
 */
export type RuleError = "not_found" | "deletion_pending" | "active_fire" | "retries_exhausted";

/** A rule's answer to the caller: OK (with the schedule for claim and begin-delete) or a refusal. */
export type MutationReply = { ok: true; schedule?: ScheduleDocument } | { ok: false; error: RuleError };

/**
 * One write request against one schedule, as plain data (it crosses to the
 * SQLite worker by structured clone). Times are nanoseconds since the Unix
 * epoch; {@link ZERO_TIME_NANOS} stands for an absent `next_fire`.
 */
export type ScheduleMutation =
  | { kind: "save"; schedule: ScheduleDocument }
  | { kind: "delete"; name: string }
  | { kind: "claim"; name: string; now: bigint; nextFire: bigint; checkDue: boolean }
  | { kind: "setEnabled"; name: string; enabled: boolean }
  | { kind: "beginDelete"; name: string; deletionId: string }
  | { kind: "completeDelete"; name: string; deletionId: string }
  | { kind: "recordFire"; fire: FireDocument }
  | { kind: "recordFireStart"; name: string; fire: FireDocument }
  | { kind: "recordFireProgress"; name: string; fireId: string; at: bigint }
  | { kind: "reArmOneShot"; name: string; nextFire: bigint };

/**
 * The outcome of a rule: the reply, and what to store. `schedule` undefined
 * leaves the schedule alone, `null` deletes it; `fire` undefined leaves the
 * fire record alone. Fire records are never deleted (as in the reference
 * store, they outlive their schedule).
 */
export interface Transition {
  reply: MutationReply;
  schedule?: ScheduleDocument | null;
  fire?: FireDocument;
}

/** Which records a mutation reads: the schedule by name and, for fire rules, the fire by id. */
export function mutationTargets(m: ScheduleMutation): { scheduleName: string; fireId?: string } {
  switch (m.kind) {
    case "save":
      return { scheduleName: m.schedule.name };
    case "recordFire":
      return { scheduleName: m.fire.scheduleName, fireId: m.fire.id };
    case "recordFireStart":
      return { scheduleName: m.name, fireId: m.fire.id };
    case "recordFireProgress":
      return { scheduleName: m.name, fireId: m.fireId };
    default:
      return { scheduleName: m.name };
  }
}

/**
 * True when the schedule can fire no more: FireCount has reached a positive
 * MaxFires, or the largest Go int, past which a claim could not count the
 * fire (the harness decodes FireCount as a Go int; issue 10, found by the
 * fuzzer).
 */
function exhausted(s: ScheduleDocument): boolean {
  return (s.maxFires > 0n && s.state.fireCount >= s.maxFires) || s.state.fireCount >= INT64_MAX;
}

/**
 * The millisecond key under which a schedule sits in the Due index, or
 * undefined when it can never be due (disabled, no next fire, MaxFires
 * reached, deletion pending). The key is `floor(NextFireAt / 1 ms)`, so
 * `NextFireAt <= now` implies `key <= floor(now / 1 ms)`: an index range read
 * up to the `now` key returns every due schedule plus a few from the same
 * millisecond, which {@link isDue} then removes. Millisecond keys are exact
 * in a double (Redis sorted-set scores) for every year 0000-9999.
 */
export function dueIndexKey(s: ScheduleDocument): bigint | undefined {
  const st = s.state;
  if (!st.enabled || st.deletionId !== "" || st.nextFireAt === ZERO_TIME_NANOS || exhausted(s)) return undefined;
  return dueIndexKeyAt(st.nextFireAt);
}

/** The largest Due index key a schedule due at `now` can have (see {@link dueIndexKey}). */
export function dueIndexKeyAt(now: bigint): bigint {
  return floorDiv(now, 1_000_000n);
}

/**
 * Section 5.5 DueSchedules and the ClaimSchedule re-check: enabled, no
 * deletion pending, NextFireAt set and not after `now` (instants compared to
 * the nanosecond), and under MaxFires.
 */
export function isDue(s: ScheduleDocument, now: bigint): boolean {
  return dueIndexKey(s) !== undefined && s.state.nextFireAt <= now;
}

const refuse = (error: RuleError): Transition => ({ reply: { ok: false, error } });
const ok = (): Transition => ({ reply: { ok: true } });

/**
 * SaveSchedule: an existing schedule keeps its State (ABORTED while a
 * deletion is pending) and takes the new Spec; a new schedule takes the State
 * sent, except that a zero one (NextFireAt unset, not enabled, FireCount 0)
 * is stored enabled.
 */
export function saveRule(existing: ScheduleDocument | undefined, incoming: ScheduleDocument): Transition {
  if (existing !== undefined) {
    if (existing.state.deletionId !== "") return refuse("deletion_pending");
    return { reply: { ok: true }, schedule: { ...incoming, state: existing.state } };
  }
  const st = incoming.state;
  const zero = st.nextFireAt === ZERO_TIME_NANOS && !st.enabled && st.fireCount === 0n;
  return { reply: { ok: true }, schedule: zero ? { ...incoming, state: { ...st, enabled: true } } : incoming };
}

/** DeleteSchedule: idempotent; ABORTED while a deletion is pending. */
export function deleteRule(existing: ScheduleDocument | undefined): Transition {
  if (existing === undefined) return ok();
  if (existing.state.deletionId !== "") return refuse("deletion_pending");
  return { reply: { ok: true }, schedule: null };
}

/**
 * ClaimSchedule (`checkDue`) and ClaimScheduleNow: the at-most-once advance.
 * NOT_FOUND when unknown, disabled, deleting or exhausted; for a claim when
 * not due at `now`, for a claim-now when `LastFireAt == now` (the fence).
 * Otherwise LastFireAt = now, NextFireAt = nextFire, FireCount + 1,
 * LastFireSessionID = "pending", in-flight fields zeroed, and disabled when
 * there is no next fire.
 */
export function claimRule(existing: ScheduleDocument | undefined, now: bigint, nextFire: bigint, checkDue: boolean): Transition {
  if (existing === undefined) return refuse("not_found");
  const st = existing.state;
  if (!st.enabled || st.deletionId !== "" || exhausted(existing)) return refuse("not_found");
  if (checkDue ? !isDue(existing, now) : st.lastFireAt === now) return refuse("not_found");
  const state: ScheduleState = {
    ...st,
    lastFireAt: now,
    nextFireAt: nextFire,
    fireCount: st.fireCount + 1n,
    lastFireSessionId: PENDING_FIRE_SESSION_ID,
    lastFireStartedAt: ZERO_TIME_NANOS,
    lastFireProgressAt: ZERO_TIME_NANOS,
    fireDeadline: ZERO_TIME_NANOS,
    enabled: nextFire === ZERO_TIME_NANOS ? false : st.enabled,
  };
  const schedule = { ...existing, state };
  return { reply: { ok: true, schedule }, schedule };
}

/** SetScheduleEnabled: sets only Enabled; NOT_FOUND when unknown, ABORTED while deleting. */
export function setEnabledRule(existing: ScheduleDocument | undefined, enabled: boolean): Transition {
  if (existing === undefined) return refuse("not_found");
  if (existing.state.deletionId !== "") return refuse("deletion_pending");
  return { reply: { ok: true }, schedule: { ...existing, state: { ...existing.state, enabled } } };
}

/**
 * BeginScheduleDelete: NOT_FOUND when unknown; an already-deleting schedule
 * is returned unchanged (whatever id was passed); FAILED_PRECONDITION while a
 * fire is claimed or running; otherwise disabled and marked with the id.
 */
export function beginDeleteRule(existing: ScheduleDocument | undefined, deletionId: string): Transition {
  if (existing === undefined) return refuse("not_found");
  const st = existing.state;
  if (st.deletionId !== "") return { reply: { ok: true, schedule: existing } };
  if (st.lastFireSessionId === PENDING_FIRE_SESSION_ID || st.lastFireStartedAt !== ZERO_TIME_NANOS) return refuse("active_fire");
  const schedule = { ...existing, state: { ...st, enabled: false, deletionId } };
  return { reply: { ok: true, schedule }, schedule };
}

/** CompleteScheduleDelete: removes the schedule only when it is marked with this id; ABORTED otherwise. */
export function completeDeleteRule(existing: ScheduleDocument | undefined, deletionId: string): Transition {
  if (existing === undefined || existing.state.deletionId !== deletionId) return refuse("deletion_pending");
  return { reply: { ok: true }, schedule: null };
}

/** The schedule with the fire's session recorded and the in-flight fields set as given. */
function withFireState(s: ScheduleDocument, sessionId: string, startedAt: bigint, progressAt: bigint, deadline: bigint): ScheduleDocument {
  return {
    ...s,
    state: { ...s.state, lastFireSessionId: sessionId, lastFireStartedAt: startedAt, lastFireProgressAt: progressAt, fireDeadline: deadline },
  };
}

/**
 * RecordFire: a fire id already recorded as terminal is an OK no-op (checked
 * before the schedule lookup). Otherwise NOT_FOUND when the fire's
 * ScheduleName is unknown; else the schedule records the fire's session,
 * clears its in-flight fields, and the fire is stored (replacing an
 * in-flight record of the same id). Allowed while a deletion is pending.
 */
export function recordFireRule(schedule: ScheduleDocument | undefined, existingFire: FireDocument | undefined, fire: FireDocument): Transition {
  if (existingFire !== undefined && existingFire.stop !== "") return ok();
  if (schedule === undefined) return refuse("not_found");
  return {
    reply: { ok: true },
    schedule: withFireState(schedule, fire.sessionId, ZERO_TIME_NANOS, ZERO_TIME_NANOS, ZERO_TIME_NANOS),
    fire,
  };
}

/**
 * RecordFireStart: NOT_FOUND when the schedule is unknown; an OK no-op when
 * the fire id is terminal or already started at the same instant; otherwise
 * the schedule records the session, start, progress (the fire's ProgressAt,
 * or its StartedAt when unset) and deadline, and the fire is stored as given.
 */
export function recordFireStartRule(schedule: ScheduleDocument | undefined, existingFire: FireDocument | undefined, fire: FireDocument): Transition {
  if (schedule === undefined) return refuse("not_found");
  if (existingFire !== undefined && (existingFire.stop !== "" || existingFire.startedAt === fire.startedAt)) return ok();
  const progress = fire.progressAt === ZERO_TIME_NANOS ? fire.startedAt : fire.progressAt;
  return { reply: { ok: true }, schedule: withFireState(schedule, fire.sessionId, fire.startedAt, progress, fire.deadline), fire };
}

/**
 * RecordFireProgress: NOT_FOUND when the schedule is unknown. A non-zero `at`
 * later than the schedule's LastFireProgressAt advances it; the named fire
 * record, when it exists and is in flight, has its ProgressAt advanced the
 * same way. A terminal record is never touched; a missing one is fine.
 */
export function recordFireProgressRule(schedule: ScheduleDocument | undefined, existingFire: FireDocument | undefined, at: bigint): Transition {
  if (schedule === undefined) return refuse("not_found");
  const out: Transition = { reply: { ok: true } };
  if (at === ZERO_TIME_NANOS) return out;
  if (at > schedule.state.lastFireProgressAt) out.schedule = { ...schedule, state: { ...schedule.state, lastFireProgressAt: at } };
  if (existingFire !== undefined && existingFire.stop === "" && at > existingFire.progressAt) out.fire = withFireProgress(existingFire, at);
  return out;
}

/**
 * ReArmOneShot: NOT_FOUND when unknown, ABORTED while deleting,
 * RESOURCE_EXHAUSTED when OneShotRetryCount is already the largest Go int;
 * otherwise enabled with NextFireAt = nextFire and OneShotRetryCount + 1 (the
 * retry budget is the caller's business).
 */
export function reArmRule(existing: ScheduleDocument | undefined, nextFire: bigint): Transition {
  if (existing === undefined) return refuse("not_found");
  if (existing.state.deletionId !== "") return refuse("deletion_pending");
  const st = existing.state;
  if (st.oneShotRetryCount >= INT64_MAX) return refuse("retries_exhausted");
  return { reply: { ok: true }, schedule: { ...existing, state: { ...st, enabled: true, nextFireAt: nextFire, oneShotRetryCount: st.oneShotRetryCount + 1n } } };
}

/**
 * Applies `m` to the records it targets (see {@link mutationTargets}): the
 * schedule as stored (undefined when absent) and, for fire rules, the fire
 * record as stored.
 */
export function applyMutation(m: ScheduleMutation, schedule: ScheduleDocument | undefined, fire: FireDocument | undefined): Transition {
  switch (m.kind) {
    case "save":
      return saveRule(schedule, m.schedule);
    case "delete":
      return deleteRule(schedule);
    case "claim":
      return claimRule(schedule, m.now, m.nextFire, m.checkDue);
    case "setEnabled":
      return setEnabledRule(schedule, m.enabled);
    case "beginDelete":
      return beginDeleteRule(schedule, m.deletionId);
    case "completeDelete":
      return completeDeleteRule(schedule, m.deletionId);
    case "recordFire":
      return recordFireRule(schedule, fire, m.fire);
    case "recordFireStart":
      return recordFireStartRule(schedule, fire, m.fire);
    case "recordFireProgress":
      return recordFireProgressRule(schedule, fire, m.at);
    case "reArmOneShot":
      return reArmRule(schedule, m.nextFire);
  }
}
