import { InvalidDriverResponseError } from "./errors.js";

/** Schedule tag when `Spec.PlacementOwned` is false (wire-contract.md section 5.3); also the only fire-record tag. */
export const SCHEDULE_FORMAT = "schedule-json/1";

/** Schedule tag when `Spec.PlacementOwned` is true (section 5.3). */
export const OWNED_SCHEDULE_FORMAT = "schedule-json/2-owned-placement";

/** `State.LastFireSessionID` after a claim, until the fire's session is recorded (section 5.4). */
export const PENDING_FIRE_SESSION_ID = "pending";

/**
 * `Spec` of a schedule, keys as Go writes them (section 5.4). Only `Name`,
 * `PlacementOwned` and `MaxFires` matter to the store; every other key is
 * carried as given (times are RFC 3339 text, `FireTimeout` integer
 * nanoseconds).
 */
export interface ScheduleSpec {
  Name: string;
  PlacementOwned?: boolean;
  MaxFires?: number;
  Trigger?: { Cron?: string; OneShot?: string };
  [key: string]: unknown;
}

/** `State` of a schedule (section 5.4); times are RFC 3339 text, `0001-01-01T00:00:00Z` when unset. */
export interface ScheduleState {
  NextFireAt?: string;
  LastFireAt?: string;
  FireCount?: number;
  Enabled?: boolean;
  DeletionID?: string;
  LastFireSessionID?: string;
  OneShotRetryCount?: number;
  LastFireStartedAt?: string;
  LastFireProgressAt?: string;
  FireDeadline?: string;
  [key: string]: unknown;
}

/** A schedule as the harness's `port.Schedule` JSON: `{Spec, State}`. */
export interface Schedule {
  Spec: ScheduleSpec;
  State: ScheduleState;
}

/** A fire record (`port.ScheduleFire`, section 5.4): in flight while `Stop` is empty, terminal otherwise. */
export interface ScheduleFire {
  ID: string;
  ScheduleName: string;
  SessionID: string;
  FiredAt?: string;
  StartedAt?: string;
  ProgressAt?: string;
  Deadline?: string;
  Stop?: string;
  Err?: string;
  [key: string]: unknown;
}

/** The envelope tag for a schedule: derived from `Spec.PlacementOwned` (section 5.3). */
export function scheduleFormat(schedule: Schedule): string {
  return schedule.Spec.PlacementOwned === true ? OWNED_SCHEDULE_FORMAT : SCHEDULE_FORMAT;
}

/** UTF-8 JSON of a schedule or fire, keys in the object's order. */
export function encodeRecord(value: Schedule | ScheduleFire): Uint8Array {
  return new TextEncoder().encode(JSON.stringify(value));
}

function parseObject(payload: Uint8Array, what: string, operation: string): Record<string, unknown> {
  let v: unknown;
  try {
    v = JSON.parse(Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength).toString("utf8"));
  } catch (err) {
    throw new InvalidDriverResponseError(`decode ${what}: the payload is not JSON`, operation, { cause: err });
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw new InvalidDriverResponseError(`decode ${what}: the payload is not a JSON object`, operation);
  return v as Record<string, unknown>;
}

/**
 * Decodes a schedule record from the driver (section 5.3): the tag must be
 * one of the two schedule formats and agree with `Spec.PlacementOwned`, the
 * payload a `{Spec, State}` object with a string `Spec.Name`, and, when
 * `expectedName` is given, that name.
 *
 * @throws InvalidDriverResponseError naming the unknown tag, the mismatch, or the other name (never a not-found error).
 */
export function decodeSchedule(record: { format: string; payload: Uint8Array } | undefined, operation: string, expectedName?: string): Schedule {
  if (record === undefined) throw new InvalidDriverResponseError("no schedule in the response", operation);
  if (record.format !== SCHEDULE_FORMAT && record.format !== OWNED_SCHEDULE_FORMAT) {
    throw new InvalidDriverResponseError(`unknown schedule format ${JSON.stringify(record.format)}`, operation);
  }
  const v = parseObject(record.payload, "schedule", operation);
  const spec = v.Spec as ScheduleSpec | undefined;
  if (typeof spec !== "object" || spec === null || typeof spec.Name !== "string") throw new InvalidDriverResponseError("decode schedule: Spec.Name is missing", operation);
  const state = v.State ?? {};
  if (typeof state !== "object" || state === null) throw new InvalidDriverResponseError("decode schedule: State is not an object", operation);
  const owned = spec.PlacementOwned === true;
  if (owned !== (record.format === OWNED_SCHEDULE_FORMAT)) {
    throw new InvalidDriverResponseError(`schedule ${JSON.stringify(spec.Name)} has format ${JSON.stringify(record.format)} but PlacementOwned=${owned}`, operation);
  }
  if (expectedName !== undefined && spec.Name !== expectedName) {
    throw new InvalidDriverResponseError(`asked for schedule ${JSON.stringify(expectedName)} but got ${JSON.stringify(spec.Name)}`, operation);
  }
  return { ...v, Spec: spec, State: state as ScheduleState };
}

/**
 * Decodes a fire record (format `schedule-json/1`) and, when `expectedId` is
 * given, checks its `ID` (section 5.3).
 *
 * @throws InvalidDriverResponseError naming the unknown tag or the other id.
 */
export function decodeFire(record: { format: string; payload: Uint8Array } | undefined, operation: string, expectedId?: string): ScheduleFire {
  if (record === undefined) throw new InvalidDriverResponseError("no fire record in the response", operation);
  if (record.format !== SCHEDULE_FORMAT) throw new InvalidDriverResponseError(`unknown fire record format ${JSON.stringify(record.format)}`, operation);
  const v = parseObject(record.payload, "fire", operation);
  if (typeof v.ID !== "string") throw new InvalidDriverResponseError("decode fire: ID is missing", operation);
  if (expectedId !== undefined && v.ID !== expectedId) throw new InvalidDriverResponseError(`asked for fire ${JSON.stringify(expectedId)} but got ${JSON.stringify(v.ID)}`, operation);
  return v as ScheduleFire;
}
