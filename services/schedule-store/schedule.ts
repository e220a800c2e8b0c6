/**
 * The schedule and fire JSON documents the harness sends (wire-contract.md
 * section 5.4: Go `encoding/json` of `port.Schedule` and `port.ScheduleFire`,
 * keys are the Go field names).
 *
 * A schedule is `{"Spec":{...},"State":{...}}`. The driver keeps the `Spec`
 * object as the exact text the client sent (unknown keys, key order, large
 * integers such as `FireTimeout` nanoseconds all survive) and reads only
 * `Name`, `MaxFires` and `PlacementOwned` from it. The `State` is the
 * driver's: it is decoded into {@link ScheduleState} and written back by
 * {@link encodeSchedule} in Go's key order, times in UTC. Consequences worth
 * knowing:
 * - a State received on Save for a NEW schedule is stored re-encoded: offsets
 *   become `Z` and unknown State keys are dropped (the instants are kept to
 *   the nanosecond);
 * - top-level keys other than Spec and State are dropped (Go has none).
 *
 * Keys match Go's decoder: exactly or case-insensitively; the last of several
 * matching members wins, `null` leaves a field at its zero value. Spec and
 * State may each appear only once (Go would merge duplicates; we refuse them).
 *
 * Fire records are stored and returned as the exact text received; the one
 * rewrite is {@link withFireProgress}, which replaces the `ProgressAt` value
 * (section 5.5 RecordFireProgress).
 */
import { foldKey, JsonSyntaxError, keyMatches, scanDocumentObject, type JsonMember } from "../json/json-scan.js";
import { formatRfc3339, parseRfc3339, TimeFormatError, ZERO_TIME_NANOS } from "../json/rfc3339.js";
import { strictUtf8 } from "../../common/verbatim-utf8.js";

/** Format tag of fire records and of schedules that do not own their placement (section 5.3). */
export const SCHEDULE_FORMAT_V1 = "schedule-json/1";

/** Format tag of schedules whose `Spec.PlacementOwned` is true (section 5.3). */
export const SCHEDULE_FORMAT_OWNED = "schedule-json/2-owned-placement";

/** Written to `State.LastFireSessionID` by a claim until the fire's session is known (section 5.4). */
export const PENDING_FIRE_SESSION_ID = "pending";

/**
 * `port.ScheduleState` (section 5.4). Times are nanoseconds since the Unix
 * epoch, {@link ZERO_TIME_NANOS} meaning unset; counts are Go `int` (int64).
 */
export interface ScheduleState {
  nextFireAt: bigint;
  lastFireAt: bigint;
  fireCount: bigint;
  enabled: boolean;
  /** Non-empty while a two-phase deletion is pending. */
  deletionId: string;
  /** A fire's session id, or {@link PENDING_FIRE_SESSION_ID} after a claim. */
  lastFireSessionId: string;
  oneShotRetryCount: bigint;
  lastFireStartedAt: bigint;
  lastFireProgressAt: bigint;
  fireDeadline: bigint;
}

/** A schedule as the store keeps it: the verbatim Spec text, the facts read from it, and the State. */
export interface ScheduleDocument {
  /** The `Spec` object exactly as received. */
  specText: string;
  /** `Spec.Name`. */
  name: string;
  /** `Spec.MaxFires`; zero or negative means unlimited. */
  maxFires: bigint;
  /** `Spec.PlacementOwned`; picks the format tag. */
  placementOwned: boolean;
  state: ScheduleState;
}

/** `port.ScheduleFire` (section 5.4) with the exact text it came in. Times in nanoseconds. */
export interface FireDocument {
  /** The record's JSON text, stored and returned verbatim. */
  text: string;
  id: string;
  scheduleName: string;
  sessionId: string;
  firedAt: bigint;
  startedAt: bigint;
  progressAt: bigint;
  deadline: bigint;
  /** Empty while the fire is in flight, the stop reason once terminal. */
  stop: string;
  err: string;
}

/**
 * A schedule or fire payload that cannot be decoded. `path` names the JSON
 * member (e.g. `State.NextFireAt`), or is empty for the document itself.
 */
export class ScheduleJsonError extends Error {
  override name = "ScheduleJsonError";
  constructor(
    readonly path: string,
    readonly problem: string,
  ) {
    super(path === "" ? problem : `${path}: ${problem}`);
  }
}

/** A State with every field at its zero value. */
export function zeroState(): ScheduleState {
  return {
    nextFireAt: ZERO_TIME_NANOS,
    lastFireAt: ZERO_TIME_NANOS,
    fireCount: 0n,
    enabled: false,
    deletionId: "",
    lastFireSessionId: "",
    oneShotRetryCount: 0n,
    lastFireStartedAt: ZERO_TIME_NANOS,
    lastFireProgressAt: ZERO_TIME_NANOS,
    fireDeadline: ZERO_TIME_NANOS,
  };
}

/**
 * Decodes payload bytes as UTF-8 text.
 *
 * @throws ScheduleJsonError when the bytes are not valid UTF-8.
 */
export function payloadText(payload: Uint8Array): string {
  try {
    return strictUtf8.decode(payload);
  } catch {
    throw new ScheduleJsonError("", "payload is not valid UTF-8");
  }
}

const INT64_MIN = -(2n ** 63n);

/** The largest Go `int` (int64), and so the largest FireCount and OneShotRetryCount a schedule can hold. */
export const INT64_MAX = 2n ** 63n - 1n;

/** Field decoders: each takes the raw JSON value text (never `null`) and its path. */
const decodeTime = (raw: string, path: string): bigint => {
  if (!raw.startsWith('"')) throw new ScheduleJsonError(path, "must be an RFC 3339 string");
  try {
    return parseRfc3339(JSON.parse(raw) as string);
  } catch (err) {
    if (err instanceof TimeFormatError) throw new ScheduleJsonError(path, err.message);
    throw err;
  }
};

const decodeInt = (raw: string, path: string): bigint => {
  if (!/^-?(0|[1-9][0-9]*)$/.test(raw)) throw new ScheduleJsonError(path, `must be an integer, got ${raw.slice(0, 40)}`);
  const n = BigInt(raw);
  if (n < INT64_MIN || n > INT64_MAX) throw new ScheduleJsonError(path, "overflows a 64-bit integer");
  return n;
};

const decodeBool = (raw: string, path: string): boolean => {
  if (raw !== "true" && raw !== "false") throw new ScheduleJsonError(path, "must be true or false");
  return raw === "true";
};

const decodeString = (raw: string, path: string): string => {
  if (!raw.startsWith('"')) throw new ScheduleJsonError(path, "must be a string");
  return JSON.parse(raw) as string;
};

type FieldDecoder<T> = (raw: string, path: string) => T;

/** One Go struct's fields: Go field name, decoder, property of the decoded object. */
type FieldTable<T> = ReadonlyArray<readonly [string, FieldDecoder<unknown>, keyof T]>;

/** A field table indexed by folded key (see {@link foldKey}). */
type FieldIndex<T> = Map<string, FieldTable<T>[number]>;

function indexFields<T>(table: FieldTable<T>): FieldIndex<T> {
  return new Map(table.map((f) => [foldKey(f[0]), f]));
}

/**
 * Assigns each member of one object to the matching field (Go's rules: key
 * match per {@link keyMatches}, last one wins, `null` skips); unknown keys are
 * ignored.
 */
function decodeFields<T extends object>(text: string, members: JsonMember[], fields: FieldIndex<T>, prefix: string, target: T): T {
  for (const m of members) {
    const field = fields.get(foldKey(m.key));
    if (field === undefined) continue;
    const raw = text.slice(m.valueStart, m.valueEnd);
    if (raw === "null") continue;
    const [goName, decode, prop] = field;
    (target as Record<keyof T, unknown>)[prop] = decode(raw, `${prefix}${goName}`);
  }
  return target;
}

const STATE_FIELDS = indexFields<ScheduleState>([
  ["NextFireAt", decodeTime, "nextFireAt"],
  ["LastFireAt", decodeTime, "lastFireAt"],
  ["FireCount", decodeInt, "fireCount"],
  ["Enabled", decodeBool, "enabled"],
  ["DeletionID", decodeString, "deletionId"],
  ["LastFireSessionID", decodeString, "lastFireSessionId"],
  ["OneShotRetryCount", decodeInt, "oneShotRetryCount"],
  ["LastFireStartedAt", decodeTime, "lastFireStartedAt"],
  ["LastFireProgressAt", decodeTime, "lastFireProgressAt"],
  ["FireDeadline", decodeTime, "fireDeadline"],
]);

const SPEC_FIELDS = indexFields<{ name: string; maxFires: bigint; placementOwned: boolean }>([
  ["Name", decodeString, "name"],
  ["MaxFires", decodeInt, "maxFires"],
  ["PlacementOwned", decodeBool, "placementOwned"],
]);

const FIRE_FIELDS = indexFields<FireDocument>([
  ["ID", decodeString, "id"],
  ["ScheduleName", decodeString, "scheduleName"],
  ["SessionID", decodeString, "sessionId"],
  ["FiredAt", decodeTime, "firedAt"],
  ["StartedAt", decodeTime, "startedAt"],
  ["ProgressAt", decodeTime, "progressAt"],
  ["Deadline", decodeTime, "deadline"],
  ["Stop", decodeString, "stop"],
  ["Err", decodeString, "err"],
]);

/** Scans a top-level object, turning syntax errors into ScheduleJsonErrors. */
function scanTop(text: string) {
  try {
    return scanDocumentObject(text);
  } catch (err) {
    if (err instanceof JsonSyntaxError) throw new ScheduleJsonError("", `not valid JSON: ${err.message}`);
    throw err;
  }
}

/** The single member matching `field`, or undefined. @throws ScheduleJsonError when there are several. */
function onlyMember(members: JsonMember[], field: string): JsonMember | undefined {
  const found = members.filter((m) => keyMatches(m.key, field));
  if (found.length > 1) throw new ScheduleJsonError(field, "appears more than once");
  return found[0];
}

/**
 * Decodes a State object's text (as stored, or as received inside a schedule).
 *
 * @throws ScheduleJsonError naming the State member that is malformed.
 */
export function decodeState(text: string, path = "State"): ScheduleState {
  return decodeFields(text, scanTop(text).members, STATE_FIELDS, `${path}.`, zeroState());
}

/**
 * Parses a schedule payload (section 5.4). The Spec must be a JSON object;
 * `Name`, `MaxFires` and `PlacementOwned` must have Go's types when present.
 * A missing or `null` State is the zero State.
 *
 * @throws ScheduleJsonError naming the member that is wrong.
 */
export function parseSchedule(text: string): ScheduleDocument {
  const top = scanTop(text);
  const spec = onlyMember(top.members, "Spec");
  const state = onlyMember(top.members, "State");
  if (spec === undefined) throw new ScheduleJsonError("Spec", "is missing");
  if (text.charCodeAt(spec.valueStart) !== 0x7b) throw new ScheduleJsonError("Spec", "must be a JSON object");
  const specText = text.slice(spec.valueStart, spec.valueEnd);
  const facts = decodeFields(specText, scanTop(specText).members, SPEC_FIELDS, "Spec.", { name: "", maxFires: 0n, placementOwned: false });
  let decodedState = zeroState();
  if (state !== undefined) {
    const stateText = text.slice(state.valueStart, state.valueEnd);
    if (stateText !== "null") {
      if (!stateText.startsWith("{")) throw new ScheduleJsonError("State", "must be a JSON object");
      decodedState = decodeState(stateText);
    }
  }
  return { specText, ...facts, state: decodedState };
}

/** Writes a State in Go's key order with times as RFC 3339 UTC. */
export function encodeState(s: ScheduleState): string {
  const t = (ns: bigint) => JSON.stringify(formatRfc3339(ns));
  return (
    `{"NextFireAt":${t(s.nextFireAt)},"LastFireAt":${t(s.lastFireAt)},"FireCount":${s.fireCount},` +
    `"Enabled":${s.enabled},"DeletionID":${JSON.stringify(s.deletionId)},` +
    `"LastFireSessionID":${JSON.stringify(s.lastFireSessionId)},"OneShotRetryCount":${s.oneShotRetryCount},` +
    `"LastFireStartedAt":${t(s.lastFireStartedAt)},"LastFireProgressAt":${t(s.lastFireProgressAt)},` +
    `"FireDeadline":${t(s.fireDeadline)}}`
  );
}

/** The schedule payload the driver emits: the verbatim Spec text and the encoded State. */
export function encodeSchedule(specText: string, state: ScheduleState): string {
  return `{"Spec":${specText},"State":${encodeState(state)}}`;
}

/** The format tag a schedule must carry, derived from `Spec.PlacementOwned` (section 5.3). */
export function scheduleFormat(placementOwned: boolean): string {
  return placementOwned ? SCHEDULE_FORMAT_OWNED : SCHEDULE_FORMAT_V1;
}

/**
 * Parses a fire payload (section 5.4). Every known key must have Go's type;
 * unknown keys are allowed and kept (the text is stored as is).
 *
 * @throws ScheduleJsonError naming the member that is wrong.
 */
export function parseFire(text: string): FireDocument {
  const zero: FireDocument = {
    text,
    id: "",
    scheduleName: "",
    sessionId: "",
    firedAt: ZERO_TIME_NANOS,
    startedAt: ZERO_TIME_NANOS,
    progressAt: ZERO_TIME_NANOS,
    deadline: ZERO_TIME_NANOS,
    stop: "",
    err: "",
  };
  return decodeFields(text, scanTop(text).members, FIRE_FIELDS, "", zero);
}

/**
 * The fire record with its `ProgressAt` set to `at` (RFC 3339 UTC) and every
 * other byte unchanged: the value of the last member Go would read as
 * ProgressAt is replaced, or the member is appended when absent.
 *
 * @param fire a record produced by {@link parseFire}.
 * @returns the new record, parsed.
 */
export function withFireProgress(fire: FireDocument, at: bigint): FireDocument {
  const text = fire.text;
  const top = scanDocumentObject(text);
  const value = JSON.stringify(formatRfc3339(at));
  const member = top.members.filter((m) => keyMatches(m.key, "ProgressAt")).at(-1);
  let next: string;
  if (member !== undefined) {
    next = text.slice(0, member.valueStart) + value + text.slice(member.valueEnd);
  } else {
    const last = top.members.at(-1);
    next = last === undefined
      ? `${text.slice(0, top.start + 1)}"ProgressAt":${value}${text.slice(top.start + 1)}`
      : `${text.slice(0, last.valueEnd)},"ProgressAt":${value}${text.slice(last.valueEnd)}`;
  }
  return { ...fire, text: next, progressAt: at };
}
