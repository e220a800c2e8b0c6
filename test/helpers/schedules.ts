import { create } from "@bufbuild/protobuf";
import { TimestampSchema, type Timestamp } from "@bufbuild/protobuf/wkt";

/**
 * Builders for schedule and fire payloads shaped like the Go harness's
 * `encoding/json` output (wire-contract.md section 5.4), and readers for what
 * the driver returns. Independent of the driver's own code on purpose.
 */

export const V1 = "schedule-json/1";
export const OWNED = "schedule-json/2-owned-placement";
export const ZERO = "0001-01-01T00:00:00Z";
export const PENDING = "pending";

/** Base instant of the reference suites: 2023-11-14T22:13:20Z. */
export const T0 = 1_700_000_000;

/** RFC 3339 UTC text for `sec` seconds (+ `nanos`) after the epoch, Go RFC3339Nano style. */
export function iso(sec: number, nanos = 0): string {
  const base = new Date(sec * 1000).toISOString().replace(/\.\d{3}Z$/, "");
  const frac = nanos === 0 ? "" : `.${String(nanos).padStart(9, "0").replace(/0+$/, "")}`;
  return `${base}${frac}Z`;
}

/** A protobuf Timestamp for `sec` seconds (+ `nanos`) after the epoch. */
export function ts(sec: number, nanos = 0): Timestamp {
  return create(TimestampSchema, { seconds: BigInt(sec), nanos });
}

/** Spec fields a test sets; everything else gets Go's zero value. */
export type SpecInit = { Name: string } & Record<string, unknown>;

/** The full Spec object, keys in Go's declaration order (newest ScheduleSpec). */
export function spec(init: SpecInit): Record<string, unknown> {
  const { Name, ...rest } = init;
  return {
    Name,
    Prompt: "p",
    Parts: null,
    Trigger: { Cron: "* * * * *", OneShot: ZERO },
    Selector: { ProviderID: "", ModelID: "" },
    Profile: "",
    EnvironmentRef: { Kind: "", ID: "", Revision: "" },
    PlacementScope: "",
    PlacementOwned: false,
    Mode: "",
    Limits: { MaxTurns: 0, MaxToolCalls: 0, MaxConsecutiveFailures: 0 },
    Mutating: false,
    MaxFires: 0,
    Misfire: 0,
    Singleton: false,
    Timezone: "",
    CreatedAt: ZERO,
    OneShotRetry: false,
    OneShotMaxRetries: 0,
    CarryContext: false,
    OriginSessionID: "",
    Owner: null,
    FireTimeout: 0,
    ...rest,
  };
}

/** State as the driver returns it (times as RFC 3339 text). */
export interface State {
  NextFireAt: string;
  LastFireAt: string;
  FireCount: number;
  Enabled: boolean;
  DeletionID: string;
  LastFireSessionID: string;
  OneShotRetryCount: number;
  LastFireStartedAt: string;
  LastFireProgressAt: string;
  FireDeadline: string;
}

/** The full State object, keys in Go's order, zero values where not given. */
export function state(init: Partial<State> = {}): State {
  return {
    NextFireAt: ZERO,
    LastFireAt: ZERO,
    FireCount: 0,
    Enabled: false,
    DeletionID: "",
    LastFireSessionID: "",
    OneShotRetryCount: 0,
    LastFireStartedAt: ZERO,
    LastFireProgressAt: ZERO,
    FireDeadline: ZERO,
    ...init,
  };
}

const enc = new TextEncoder();
const dec = new TextDecoder();

/** A ScheduleRecord for `{Spec, State}`, its format derived from PlacementOwned like the Go client does. */
export function scheduleRecord(specInit: SpecInit, st: Partial<State> = {}): { format: string; payload: Uint8Array } {
  const s = spec(specInit);
  return { format: s.PlacementOwned === true ? OWNED : V1, payload: enc.encode(JSON.stringify({ Spec: s, State: state(st) })) };
}

/** A ScheduleRecord with a hand-written payload text. */
export function rawScheduleRecord(text: string, format = V1): { format: string; payload: Uint8Array } {
  return { format, payload: enc.encode(text) };
}

/** What a returned schedule holds: the payload text, the parsed Spec, the State and the raw Spec text. */
export function readSchedule(record: { format: string; payload: Uint8Array } | undefined) {
  if (record === undefined) throw new Error("no schedule record in the response");
  const text = dec.decode(record.payload);
  const doc = JSON.parse(text) as { Spec: Record<string, unknown>; State: State };
  const cut = text.lastIndexOf(',"State":');
  if (!text.startsWith('{"Spec":') || cut < 0) throw new Error(`unexpected schedule payload shape: ${text.slice(0, 200)}`);
  return { format: record.format, text, spec: doc.Spec, state: doc.State, specText: text.slice('{"Spec":'.length, cut) };
}

/** `port.ScheduleFire` fields. */
export interface Fire {
  ID: string;
  ScheduleName: string;
  SessionID: string;
  FiredAt: string;
  StartedAt: string;
  ProgressAt: string;
  Deadline: string;
  Stop: string;
  Err: string;
}

/** A fire record with Go's key order and zero values where not given. */
export function fireRecord(init: Partial<Fire> & { ID: string; ScheduleName: string }): { format: string; payload: Uint8Array } {
  const f: Fire = { SessionID: "", FiredAt: ZERO, StartedAt: ZERO, ProgressAt: ZERO, Deadline: ZERO, Stop: "", Err: "", ...init };
  const ordered = { ID: f.ID, ScheduleName: f.ScheduleName, SessionID: f.SessionID, FiredAt: f.FiredAt, StartedAt: f.StartedAt, ProgressAt: f.ProgressAt, Deadline: f.Deadline, Stop: f.Stop, Err: f.Err };
  return { format: V1, payload: enc.encode(JSON.stringify(ordered)) };
}

/** A returned fire record's text and fields. */
export function readFire(record: { format: string; payload: Uint8Array } | undefined): Fire & { text: string; format: string } {
  if (record === undefined) throw new Error("no fire record in the response");
  const text = dec.decode(record.payload);
  return { ...(JSON.parse(text) as Fire), text, format: record.format };
}
