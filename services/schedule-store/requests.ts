/**
 * Request checks of the schedule services (wire-contract.md section 5.5 and
 * the validation tables of section 8.14). Every check runs before storage is
 * touched and fails with INVALID_ARGUMENT naming the field (docs/DESIGN.md
 * principle 6).
 */
import type { Timestamp } from "@bufbuild/protobuf/wkt";
import type { ScheduleFireRecord, ScheduleRecord } from "../../gen/mecatl/driver/v1/schedule_store_pb.js";
import { invalidArgument } from "../rpc/errors.js";
import { HARNESS_MESSAGE_BYTES, recordAnswerBytes } from "../rpc/message-size.js";
import { timestampToNanos } from "../rpc/timestamp.js";
import { requireFormat, requireNonEmptyBytes, requirePresent } from "../rpc/validate.js";
import { ZERO_TIME_NANOS } from "../json/rfc3339.js";
import {
  parseFire,
  parseSchedule,
  payloadText,
  ScheduleJsonError,
  SCHEDULE_FORMAT_OWNED,
  SCHEDULE_FORMAT_V1,
  type FireDocument,
  type ScheduleDocument,
} from "./schedule.js";

/** Earliest and latest `Timestamp.seconds` protobuf allows: 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z. */
const MIN_SECONDS = -62_135_596_800n;
const MAX_SECONDS = 253_402_300_799n;

/**
 * Converts a Timestamp to nanoseconds since the Unix epoch after checking it
 * is a valid protobuf Timestamp (years 0001-9999, nanos 0-999999999).
 *
 * @throws ConnectError INVALID_ARGUMENT naming `field`.
 */
export function timestampNanos(field: string, ts: Timestamp): bigint {
  if (ts.seconds < MIN_SECONDS || ts.seconds > MAX_SECONDS) throw invalidArgument(field, "is outside years 0001-9999");
  if (!Number.isInteger(ts.nanos) || ts.nanos < 0 || ts.nanos > 999_999_999) throw invalidArgument(field, "nanos must be in 0..999999999");
  return timestampToNanos(ts);
}

/** A required Timestamp field, in nanoseconds. @throws ConnectError INVALID_ARGUMENT when absent or invalid. */
export function requireTime(field: string, ts: Timestamp | undefined): bigint {
  return timestampNanos(field, requirePresent(field, ts));
}

/** An optional Timestamp field in nanoseconds; absent is the zero time ("no next fire", section 5.5). */
export function optionalTime(field: string, ts: Timestamp | undefined): bigint {
  return ts === undefined ? ZERO_TIME_NANOS : timestampNanos(field, ts);
}

/** Runs a payload decoder, turning its ScheduleJsonError into INVALID_ARGUMENT on `field`. */
function decodePayload<T>(field: string, payload: Uint8Array, decode: (text: string) => T): T {
  try {
    return decode(payloadText(payload));
  } catch (err) {
    if (err instanceof ScheduleJsonError) throw invalidArgument(field, err.message);
    throw err;
  }
}

/**
 * Bytes kept free in a schedule's answers for the state the store writes into
 * its payload as it is claimed, fired and deleted (counts, nanosecond
 * timestamps, and IDs of at most 16 KiB each: the fire's session, the
 * deletion): a schedule whose payload left less was stored, then its claim
 * was applied and answered RESOURCE_EXHAUSTED "Sent message larger than max",
 * and it could never be loaded again (a fresh-eyes run).
 */
export const SCHEDULE_STATE_ROOM_BYTES = 256 * 1024;

/**
 * SaveSchedule's checks, in the reference order: the envelope (present,
 * known format, non-empty payload, room for its answers within the harness's
 * 64 MiB limit), the JSON (decodable, format tag agreeing
 * with `Spec.PlacementOwned`), then `Spec.Name` equal to `name`.
 *
 * @param name the already-checked request name.
 * @throws ConnectError INVALID_ARGUMENT naming the field.
 */
export function validScheduleRecord(name: string, rec: ScheduleRecord | undefined): ScheduleDocument {
  const record = requirePresent("schedule", rec);
  requireFormat("schedule.format", record.format, [SCHEDULE_FORMAT_V1, SCHEDULE_FORMAT_OWNED]);
  requireNonEmptyBytes("schedule.payload", record.payload);
  // LoadSchedule and the claims answer the schedule with the state the store adds: all must fit the harness's 64 MiB limit.
  if (recordAnswerBytes(record.format, record.payload.byteLength) + SCHEDULE_STATE_ROOM_BYTES > HARNESS_MESSAGE_BYTES) {
    throw invalidArgument(
      "schedule.payload",
      `${record.payload.byteLength} bytes is too large: its LoadSchedule and ClaimSchedule answers, with up to ${SCHEDULE_STATE_ROOM_BYTES} bytes of state a claim or fire adds, would exceed the harness's ${HARNESS_MESSAGE_BYTES}-byte message limit`,
    );
  }
  const doc = decodePayload("schedule.payload", record.payload, parseSchedule);
  if ((record.format === SCHEDULE_FORMAT_OWNED) !== doc.placementOwned) {
    throw invalidArgument("schedule.format", `${JSON.stringify(record.format)} does not match Spec.PlacementOwned=${doc.placementOwned}`);
  }
  if (doc.name !== name) throw invalidArgument("name", `${JSON.stringify(name)} does not match the payload's Spec.Name ${JSON.stringify(doc.name)}`);
  return doc;
}

/**
 * RecordFire's and RecordFireStart's envelope checks: present, format
 * `schedule-json/1`, non-empty, decodable, and the payload's `ID` equal to
 * `fireId`.
 *
 * @param fireId the already-checked request fire id.
 * @throws ConnectError INVALID_ARGUMENT naming the field.
 */
export function validFireRecord(fireId: string, rec: ScheduleFireRecord | undefined): FireDocument {
  const record = requirePresent("fire", rec);
  requireFormat("fire.format", record.format, [SCHEDULE_FORMAT_V1]);
  requireNonEmptyBytes("fire.payload", record.payload);
  const doc = decodePayload("fire.payload", record.payload, parseFire);
  if (doc.id !== fireId) throw invalidArgument("fire_id", `${JSON.stringify(fireId)} does not match the payload's ID ${JSON.stringify(doc.id)}`);
  return doc;
}
