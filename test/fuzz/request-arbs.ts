/**
 * fast-check arbitraries for the requests of every RPC the server mounts
 * (issue 10, deliverable 5): messages of the right type whose fields hold
 * arbitrary values (empty, blank, huge, control characters, any code point,
 * out-of-range numbers and timestamps, payloads that are valid, nearly valid
 * or not JSON at all), optionally damaged at the byte level
 * (wire-mutations.ts). Ids are drawn mostly from small pools the fuzzer
 * populates first, so that requests reach existing records and the rules
 * behind validation, not only the validation.
 */
import fc from "fast-check";
import { create, toBinary, type DescField, type DescMessage, type DescMethod, type DescService } from "@bufbuild/protobuf";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { EventLogService } from "../../gen/mecatl/driver/v1/event_log_pb.js";
import { SessionLeaseService } from "../../gen/mecatl/driver/v1/session_lease_pb.js";
import { ScheduleOneShotReArmerService, ScheduleStoreService } from "../../gen/mecatl/driver/v1/schedule_store_pb.js";
import { Health } from "../../gen/grpc/health/v1/health_pb.js";
import { iso, OWNED, PENDING, spec, state, T0, V1, ZERO } from "../helpers/schedules.js";
import { mutationArb, type Mutation } from "./wire-mutations.js";

/** Every service a `serve all` process answers, health included. */
export const FUZZED_SERVICES: readonly DescService[] = [SessionStoreService, EventLogService, SessionLeaseService, ScheduleStoreService, ScheduleOneShotReArmerService, Health];

/** Ids and values that exist in the store (or were handed out by it), so requests can hit them. */
export interface FuzzPools {
  sessionIds: string[];
  scheduleNames: string[];
  fireIds: string[];
  deletionIds: string[];
  owners: string[];
  /** Cursors returned by Append, AppendGap and ReadAfter. */
  cursors: string[];
  /** Lease tokens handed out by Acquire. */
  tokens: bigint[];
  /** Health service names the server knows. */
  healthNames: string[];
}

/** One request as sent: its method, the bytes of its message, and the mutation applied (or `none`). */
export interface FuzzRequest {
  service: DescService;
  method: DescMethod;
  bytes: Uint8Array;
  mutation: string;
  /** The field a refusal must name (see {@link Mutation.field}). */
  field?: string;
}

const utf8 = new TextEncoder();

/** Strings of every awkward kind, short enough to be cheap. */
const anyString: fc.Arbitrary<string> = fc.oneof(
  fc.constant(""),
  fc.constantFrom(" ", "\t", "\n \r", "\u00a0", "\u3000", "\ufeff", "\u0000", "..", "/", "{x}", "*", "%s", "\\"),
  fc.string({ maxLength: 40 }),
  fc.string({ unit: "binary", maxLength: 40 }),
  fc.string({ unit: fc.integer({ min: 0, max: 31 }).map((c) => String.fromCharCode(c)), maxLength: 8 }),
);

/** Strings near and past the 16 KiB id limit in bytes, with one-, two- and four-byte characters. */
const longString: fc.Arbitrary<string> = fc
  .tuple(fc.constantFrom("a", "é", "😀"), fc.oneof(fc.integer({ min: 4000, max: 17_000 }), fc.constantFrom(4096, 8192, 16_384, 16_385)))
  .map(([c, n]) => c.repeat(Math.ceil(n / Buffer.byteLength(c))));

function idArb(pool: readonly string[]): fc.Arbitrary<string> {
  return fc.oneof({ weight: 6, arbitrary: fc.constantFrom(...pool) }, { weight: 3, arbitrary: anyString }, { weight: 1, arbitrary: longString });
}

/** Valid RFC 3339 texts: instants near the pools' (to the nanosecond), and the zero time. */
const validTime: fc.Arbitrary<string> = fc.oneof(
  { weight: 3, arbitrary: fc.tuple(fc.integer({ min: T0 - 1000, max: T0 + 100_000 }), fc.integer({ min: 0, max: 999_999_999 })).map(([s, n]) => iso(s, n)) },
  { weight: 1, arbitrary: fc.constant(ZERO) },
);

/** RFC 3339 texts: mostly valid, else malformed, out of range or not a string. */
const timeText: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 8, arbitrary: validTime },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      "0000-01-01T00:00:00Z",
      "9999-12-31T23:59:59.999999999Z",
      "9999-12-31T23:59:59.999999999-23:59",
      "0001-01-01T00:00:00+23:59",
      "2023-02-30T00:00:00Z",
      "2023-11-14T22:13:60Z",
      "2023-11-14T24:00:00Z",
      "2023-11-14T22:13:20+24:00",
      "2023-11-14T22:13:20.1234567890Z",
      "2023-11-14T22:13:20.Z",
      "2023-11-14 22:13:20Z",
      "2023-11-14T22:13:20z",
      "+002023-11-14T22:13:20Z",
      "",
    ),
  },
  { weight: 1, arbitrary: fc.oneof(anyString, fc.jsonValue({ maxDepth: 1 })) },
);

/** Marks a string that {@link rawNumbers} turns into a bare JSON number, so texts JSON.stringify cannot write (beyond 2^53, `1E2`) reach the server. */
const RAW = "\u0000raw:";

/** Replaces every {@link RAW}-marked string of a JSON.stringify result by its bare number text. */
function rawNumbers(json: string): string {
  return json.replace(/"\\u0000raw:([^"]*)"/g, "$1");
}

/** Marks a string that {@link fillSlots} replaces by the value of a request field, so a payload agrees with its request. */
const SLOT = "\u0000slot:";

/** Mostly the request's own `field` (a payload naming its request's schedule or fire), else `other`. */
function slotOr(field: string, other: fc.Arbitrary<string>): fc.Arbitrary<string> {
  return fc.oneof({ weight: 4, arbitrary: fc.constant(`${SLOT}${field}`) }, { weight: 1, arbitrary: other });
}

/**
 * A copy of a request init whose schedule or fire payload has its
 * {@link SLOT}s filled with the request's `name` and `fire_id` (a RecordFire
 * request has no name: its fire names schedule `fallbackName`). When
 * `strict`, a schedule's format is also made to agree with its
 * `Spec.PlacementOwned`, as a correct client does.
 */
function fillSlots(init: Record<string, unknown>, fallbackName: string, strict: boolean): Record<string, unknown> {
  const out = { ...init };
  for (const key of ["schedule", "fire"]) {
    const record = init[key] as { format?: string; payload?: Uint8Array } | undefined;
    if (record?.payload === undefined) continue;
    const values: Record<string, unknown> = { name: init.name ?? fallbackName, fire_id: init.fireId };
    const text = Buffer.from(record.payload).toString("utf8").replace(/"\\u0000slot:(\w+)"/g, (_m, f: string) => JSON.stringify(values[f] ?? ""));
    const owned = strict && key === "schedule" && text.includes('"PlacementOwned":true');
    out[key] = { ...record, format: strict && key === "schedule" ? (owned ? OWNED : V1) : record.format, payload: utf8.encode(text) };
  }
  return out;
}

/** Go `int` (int64) values: small ones and the edges of the range. */
const validGoInt: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 6, arbitrary: fc.integer({ min: -3, max: 5 }) },
  { weight: 2, arbitrary: fc.constantFrom("9223372036854775807", "9223372036854775806", "-9223372036854775808", "-0").map((t) => `${RAW}${t}`) },
);

/** Go `int` values, and numbers Go would refuse (fractions, beyond int64, other types). */
const goInt: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 8, arbitrary: validGoInt },
  { weight: 1, arbitrary: fc.constantFrom("9223372036854775808", "-9223372036854775809", "18446744073709551616", "1e400", "1E2", "0.0", "1.0e1").map((t) => `${RAW}${t}`) },
  { weight: 1, arbitrary: fc.constantFrom(Number.MAX_SAFE_INTEGER, -1e300, 1e300, 1.5, "7", null, true) },
);

/** A value that may be replaced by any JSON value (type confusion). */
function orWild<T>(arb: fc.Arbitrary<T>): fc.Arbitrary<unknown> {
  return fc.oneof({ weight: 9, arbitrary: arb }, { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 2 }) });
}

/** Small edits of a JSON text: delete, insert or repeat a few characters. */
function mutateText(text: fc.Arbitrary<string>): fc.Arbitrary<string> {
  const edit = fc.tuple(fc.nat(), fc.constantFrom("delete", "insert", "repeat"), fc.string({ minLength: 1, maxLength: 3 }));
  return fc.tuple(text, fc.array(edit, { minLength: 1, maxLength: 4 })).map(([t, edits]) => {
    let out = t;
    for (const [at, kind, s] of edits) {
      const i = out.length === 0 ? 0 : at % out.length;
      if (kind === "delete") out = out.slice(0, i) + out.slice(i + s.length);
      else if (kind === "insert") out = out.slice(0, i) + s + out.slice(i);
      else out = out.slice(0, i) + out.slice(i, i + 8).repeat(2) + out.slice(i + 8);
    }
    return out;
  });
}

/** A JSON text that is usually well-formed, sometimes edited, sometimes any JSON at all. */
function jsonTextArb(structured: fc.Arbitrary<string>): fc.Arbitrary<string> {
  return fc.oneof({ weight: 8, arbitrary: structured }, { weight: 2, arbitrary: mutateText(structured) }, { weight: 1, arbitrary: fc.json({ maxDepth: 3 }) });
}

/**
 * Schedule documents (`{"Spec":...,"State":...}`, section 5.4). When
 * `strict`, valid in every field; otherwise half are, and the others put a
 * malformed or mistyped value in any field, or are edited or any JSON.
 */
function scheduleJson(p: FuzzPools, strict: boolean): fc.Arbitrary<string> {
  const doc = (wild: boolean) => {
    const v = <T>(valid: fc.Arbitrary<T>, anything: fc.Arbitrary<unknown> = orWild(valid)) => (wild ? anything : valid);
    const st = fc.record({
      NextFireAt: v(validTime, timeText),
      LastFireAt: v(validTime, timeText),
      FireCount: v(validGoInt, goInt),
      Enabled: v(fc.boolean()),
      DeletionID: v(fc.oneof({ weight: 4, arbitrary: fc.constant("") }, { weight: 1, arbitrary: fc.constantFrom(...p.deletionIds) })),
      LastFireSessionID: v(fc.constantFrom("", PENDING, "s-fired")),
      OneShotRetryCount: v(validGoInt, goInt),
      LastFireStartedAt: v(validTime, timeText),
      LastFireProgressAt: v(validTime, timeText),
      FireDeadline: v(validTime, timeText),
    });
    const specFields = fc.record({
      Name: v(slotOr("name", idArb(p.scheduleNames))),
      PlacementOwned: v(fc.boolean()),
      MaxFires: v(validGoInt, goInt),
      FireTimeout: v(validGoInt, goInt),
      Unknown: fc.jsonValue({ maxDepth: 2 }),
    });
    return fc
      .tuple(specFields, fc.option(st, { nil: undefined, freq: 4 }))
      .map(([sp, st]) => rawNumbers(JSON.stringify({ Spec: spec(sp as { Name: string }), ...(st === undefined ? {} : { State: state(st as never) }) })));
  };
  return strict ? doc(false) : jsonTextArb(fc.oneof(doc(false), doc(true)));
}

/** Fire documents (section 5.4), valid or not as {@link scheduleJson}. */
function fireJson(p: FuzzPools, strict: boolean): fc.Arbitrary<string> {
  const doc = (wild: boolean) => {
    const v = <T>(valid: fc.Arbitrary<T>, anything: fc.Arbitrary<unknown> = orWild(valid)) => (wild ? anything : valid);
    return fc
      .record({
        ID: v(slotOr("fire_id", idArb(p.fireIds))),
        ScheduleName: v(slotOr("name", idArb(p.scheduleNames))),
        SessionID: v(idArb(p.sessionIds)),
        FiredAt: v(validTime, timeText),
        StartedAt: v(validTime, timeText),
        ProgressAt: v(validTime, timeText),
        Deadline: v(validTime, timeText),
        Stop: v(fc.constantFrom("", "", "done", "failed")),
        Err: v(fc.constant(""), anyString),
      })
      .map((f) => JSON.stringify(f));
  };
  return strict ? doc(false) : jsonTextArb(fc.oneof(doc(false), doc(true)));
}

const eventJson: fc.Arbitrary<string> = fc.oneof(
  { weight: 6, arbitrary: fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 }).map((o) => JSON.stringify(o)) },
  { weight: 2, arbitrary: fc.json({ maxDepth: 2 }) },
  { weight: 1, arbitrary: fc.constantFrom("{", "{}}", "[]", "null", "\"x\"", "{\"a\":1,}", "\ufeff{}", `${"[".repeat(100_000)}${"]".repeat(100_000)}`, `{"a":${"[".repeat(50_000)}`) },
);

/** Bytes of a payload: the structured JSON text; unless `strict`, sometimes empty, random, or large bytes. */
function payloadArb(text: fc.Arbitrary<string>, strict: boolean): fc.Arbitrary<Uint8Array> {
  if (strict) return text.map((t) => utf8.encode(t));
  return fc.oneof(
    { weight: 12, arbitrary: text.map((t) => utf8.encode(t)) },
    { weight: 1, arbitrary: fc.constant(new Uint8Array(0)) },
    { weight: 2, arbitrary: fc.uint8Array({ maxLength: 64 }) },
    { weight: 1, arbitrary: fc.integer({ min: 1, max: 3 * 1024 * 1024 }).map((n) => new Uint8Array(n).fill(0x7b)) },
  );
}

/** A cursor: one the server issued, an envelope with arbitrary fields, or any text. */
function cursorArb(p: FuzzPools): fc.Arbitrary<string> {
  const envelope = fc
    .record({
      v: orWild(fc.constantFrom("cur/1", "cur/2", "")),
      s: orWild(idArb(p.sessionIds)),
      g: orWild(fc.oneof(fc.stringMatching(/^[0-9a-f]{16}$/), anyString)),
      p: orWild(fc.oneof(fc.nat({ max: 50 }).map(String), fc.constantFrom("0", "01", "9999999999999999", "1e3", "-1"))),
    })
    .map((o) => Buffer.from(JSON.stringify(o)).toString("base64url"));
  const issued = p.cursors.length > 0 ? fc.constantFrom(...p.cursors) : envelope;
  return fc.oneof(
    { weight: 2, arbitrary: fc.constant("") },
    { weight: 5, arbitrary: issued },
    { weight: 3, arbitrary: envelope },
    { weight: 2, arbitrary: mutateText(issued) },
    { weight: 1, arbitrary: anyString },
  );
}

/** Timestamps near the pools' instants. */
const validTimestamp = fc.record({ seconds: fc.integer({ min: T0 - 1000, max: T0 + 100_000 }).map(BigInt), nanos: fc.integer({ min: 0, max: 999_999_999 }) });

/** Timestamps: mostly valid, else at and past the edges of years 0001-9999, or with out-of-range nanos. */
const timestampArb = fc.oneof(
  { weight: 6, arbitrary: validTimestamp },
  {
    weight: 3,
    arbitrary: fc.record({
      seconds: fc.oneof(
        fc.constantFrom(-62_135_596_800n, -62_135_596_801n, 253_402_300_799n, 253_402_300_800n, 0n, -1n, 2n ** 63n - 1n, -(2n ** 63n)),
        fc.bigInt(-(2n ** 63n), 2n ** 63n - 1n),
      ),
      nanos: fc.oneof(fc.integer({ min: 0, max: 999_999_999 }), fc.constantFrom(-1, 1_000_000_000, 2_147_483_647, -2_147_483_648)),
    }),
  },
);

const FORMATS: Record<string, string[]> = {
  "mecatl.driver.v1.SessionSnapshot": ["sessnap-json/1"],
  "mecatl.driver.v1.LoggedEvent": ["eventlog-json/1"],
  "mecatl.driver.v1.ScheduleRecord": [V1, OWNED],
  "mecatl.driver.v1.ScheduleFireRecord": [V1],
};

/**
 * The arbitrary for one field of `parent`, chosen by the field's name and
 * type. When `strict`, only values a correct client sends (pool ids, known
 * formats, valid payloads and times), so that the request reaches the rules
 * behind validation; otherwise values of every kind.
 */
function fieldArb(parent: DescMessage, f: DescField, p: FuzzPools, depth: number, strict: boolean): fc.Arbitrary<unknown> | undefined {
  const pick = (valid: fc.Arbitrary<unknown>, any: fc.Arbitrary<unknown>) => (strict ? valid : any);
  const id = (pool: readonly string[]) => pick(fc.constantFrom(...pool), idArb(pool));
  if (f.fieldKind === "message") {
    if (f.message.typeName === "google.protobuf.Timestamp") return pick(validTimestamp, fc.option(timestampArb, { nil: undefined, freq: 8 }));
    if (depth > 2) return undefined;
    const sub = messageArb(f.message, p, depth + 1, strict);
    return pick(sub, fc.option(sub, { nil: undefined, freq: 8 }));
  }
  if (f.fieldKind !== "scalar") return undefined;
  switch (f.name) {
    case "session_id":
    case "root_session_id":
    case "record_session_id":
      return id(p.sessionIds);
    case "name":
    case "schedule_name":
      return id(p.scheduleNames);
    case "fire_id":
      return id(p.fireIds);
    case "deletion_id":
      return id(p.deletionIds);
    case "owner":
      return id(p.owners);
    case "service":
      return id(p.healthNames);
    case "cursor":
      return pick(fc.oneof(fc.constant(""), ...(p.cursors.length > 0 ? [fc.constantFrom(...p.cursors)] : [])), cursorArb(p));
    case "activity_state":
      return pick(fc.constantFrom("", "draft", "active"), fc.oneof(fc.constantFrom("", "draft", "active"), anyString));
    case "format": {
      const valid = fc.constantFrom(...(FORMATS[parent.typeName] ?? ["x"]));
      return pick(valid, fc.oneof({ weight: 8, arbitrary: valid }, { weight: 2, arbitrary: fc.oneof(anyString, fc.constantFrom(V1, OWNED, "sessnap-json/1", "eventlog-json/1")) }));
    }
    case "payload":
      switch (parent.typeName) {
        case "mecatl.driver.v1.ScheduleRecord":
          return payloadArb(scheduleJson(p, strict), strict);
        case "mecatl.driver.v1.ScheduleFireRecord":
          return payloadArb(fireJson(p, strict), strict);
        case "mecatl.driver.v1.LoggedEvent":
          return payloadArb(strict ? eventJson.filter((t) => t.startsWith("{\"") || t === "{}") : eventJson, strict);
        default:
          return payloadArb(fc.json({ maxDepth: 2 }), strict);
      }
    case "token": {
      const issued = p.tokens.length > 0 ? fc.constantFrom(...p.tokens) : fc.constant(1n);
      return pick(issued, fc.oneof(issued, fc.bigInt(0n, 2n ** 64n - 1n)));
    }
    case "follow":
      return fc.oneof({ weight: 9, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) });
  }
  switch (f.scalar) {
    case 9 /* STRING */:
      return pick(fc.string({ maxLength: 20 }), fc.oneof({ weight: 9, arbitrary: anyString }, { weight: 1, arbitrary: longString }));
    case 12 /* BYTES */:
      return fc.uint8Array({ maxLength: 64 });
    case 8 /* BOOL */:
      return fc.boolean();
    case 5 /* INT32 */:
      return pick(fc.integer({ min: 0, max: 300 }), fc.oneof(fc.integer({ min: -3, max: 300 }), fc.integer()));
    case 3 /* INT64 */:
      return fc.bigInt(-(2n ** 63n), 2n ** 63n - 1n);
    case 4 /* UINT64 */:
      return fc.bigInt(0n, 2n ** 64n - 1n);
    default:
      return undefined;
  }
}

/** An init object for `desc` with every field it has an arbitrary for (see {@link fieldArb} for `strict`). */
function messageArb(desc: DescMessage, p: FuzzPools, depth: number, strict: boolean): fc.Arbitrary<Record<string, unknown>> {
  const model: Record<string, fc.Arbitrary<unknown>> = {};
  for (const f of desc.fields) {
    const arb = fieldArb(desc, f, p, depth, strict);
    if (arb !== undefined) model[f.localName] = arb;
  }
  return fc.record(model);
}

/**
 * Requests for one method: a third are valid requests (strict field values,
 * never mutated), the rest have fields of every kind and half of those are
 * then mutated at the byte level.
 */
function methodRequestArb(service: DescService, method: DescMethod, p: FuzzPools): fc.Arbitrary<FuzzRequest> {
  const chaos = fc.tuple(messageArb(method.input, p, 0, false), fc.option(mutationArb(method.input), { nil: undefined, freq: 2 }), fc.constant(false));
  const valid = fc.tuple(messageArb(method.input, p, 0, true), fc.constant(undefined), fc.constant(true));
  return fc
    .oneof({ weight: 1, arbitrary: valid }, { weight: 2, arbitrary: chaos })
    .map(([init, mutation, strict]) => {
      const bytes = toBinary(method.input, create(method.input, fillSlots(init, p.scheduleNames[1]!, strict) as never));
      const req: FuzzRequest = { service, method, bytes: mutation === undefined ? bytes : mutation.apply(bytes), mutation: mutation?.name ?? "none", field: mutation?.field };
      // fast-check prints counterexamples with this: short, and enough to replay (the first 256 bytes in hex).
      return Object.assign(req, { [fc.toStringMethod]: () => `${service.name}/${method.name} (${req.mutation}, ${req.bytes.length} bytes: ${Buffer.from(req.bytes.subarray(0, 256)).toString("hex")})` });
    });
}

/** Requests for every method of every {@link FUZZED_SERVICES} service, each method equally likely. */
export function requestArb(p: FuzzPools): fc.Arbitrary<FuzzRequest> {
  return fc.oneof(...FUZZED_SERVICES.flatMap((s) => s.methods.map((m) => methodRequestArb(s, m, p))));
}
