import {
  decodeKeyBytes,
  expectDocumentEnd,
  foldKey,
  forEachMemberBytes,
  JsonSyntaxError,
  keyMatches,
  scanObjectBytes,
  scanValueBytes,
  STOP_WALK,
  type JsonMember,
} from "../json/json-scan.js";
import { parseRfc3339, TimeFormatError, ZERO_TIME_NANOS } from "../json/rfc3339.js";
import { isValidIncarnation, legacyIncarnation } from "../../common/incarnation.js";
import { principalScopeHash } from "../../common/principal-scope.js";
import { emptyRelationship, type SessionRelationship } from "../../common/session-relationship.js";
import { walkMessages, type ActivityState } from "./activity.js";

/** A session's owner as the payload names it (spec/session-metadata.md section 1.7). */
export interface SessionOwner {
  issuer: string;
  subject: string;
  grantType: string;
  name: string;
}

/** The `environment_ref` of a payload; empty strings when absent. */
export interface EnvironmentRef {
  kind: string;
  id: string;
  revision: string;
}

/**
 * What PageMetadata and ReadLineage need of a `sessnap-json/1` snapshot
 * (spec/session-metadata.md sections 1.2 and 2.1), derived once on Save and
 * Create and stored beside it.
 */
export interface SessionMetadata {
  state: string;
  turns: number;
  modelId: string;
  /** `created_at` in nanoseconds since the epoch; undefined when zero (unset) or outside what a Timestamp can carry. */
  createdAtNanos: bigint | undefined;
  title: string;
  titleProvenance: string;
  /** Never empty: a missing kind is `unknown`. */
  kind: string;
  relationship: SessionRelationship;
  owner: SessionOwner | undefined;
  environmentRef: EnvironmentRef;
  /** The persisted incarnation, or the derived legacy one (section 1.5). */
  incarnation: string;
  /** PrincipalScopeHash of the owner, 32 bytes (section 3.1): the lineage `owner_scope` and the paging owner scope. */
  ownerScope: Uint8Array;
}

/**
 * Everything stored beside a snapshot (issue 12). `metadata` is undefined for
 * a payload that is not a sessnap object: such a session is stored and
 * listed with only its id, save time and size, as the harness's file store
 * lists undecodable snapshots (section 2.3), and has no lineage record.
 */
export interface SessionProjection {
  metadata: SessionMetadata | undefined;
  /** The value the write sent, or, when it sent none, the one derived from `messages` (`""` for a non-sessnap payload). */
  activityState: ActivityState;
  /** The payload's length in bytes (section 1.8): positive, as the harness's Redis store reports it. */
  estimatedBytes: number;
}

/** A sessnap payload that cannot be stored as is; `problem` names the payload field. */
export class SnapshotPayloadError extends Error {
  override name = "SnapshotPayloadError";
}

/** Earliest and latest instants a protobuf Timestamp can carry (0001-01-01 to 9999-12-31), in nanoseconds. */
const TIMESTAMP_MIN_NANOS = -62_135_596_800n * 1_000_000_000n;
const TIMESTAMP_MAX_NANOS = 253_402_300_800n * 1_000_000_000n - 1n;

const INT32_MIN = -(2 ** 31);
const INT32_MAX = 2 ** 31 - 1;

/** Fields a JSON `null` resets, as Go resets a pointer, slice or map; `null` leaves every other field as it was. */
const NULL_RESETS: ReadonlySet<string> = new Set(["owner", "messages", "branch_index"]);

/** Fields that are Go structs: a key that occurs twice merges into one value, each occurrence setting only the keys it holds. */
const MERGED: ReadonlySet<string> = new Set(["owner", "relationship", "counters", "environment_ref"]);

/** The members assigned to each field by {@link Reader.fields}. */
class Fields {
  private readonly byName = new Map<string, JsonMember[]>();

  /** The member that sets `name` (the last one), or undefined when none does. */
  get(name: string): JsonMember | undefined {
    return this.byName.get(name)?.at(-1);
  }

  /** Every member that sets struct field `name`, in order; undefined when none does. */
  all(name: string): readonly JsonMember[] | undefined {
    return this.byName.get(name);
  }

  assign(name: string, m: JsonMember, merged: boolean): void {
    const seen = this.byName.get(name);
    if (merged && seen !== undefined) seen.push(m);
    else this.byName.set(name, [m]);
  }

  reset(name: string): void {
    this.byName.delete(name);
  }
}

/** Reads member values out of the payload bytes, naming the payload field in every error. */
class Reader {
  private readonly buf: Buffer;

  constructor(private readonly b: Uint8Array) {
    this.buf = Buffer.from(b.buffer, b.byteOffset, b.byteLength);
  }

  /**
   * The members of an object as Go's decoder assigns them to the fields
   * `names`: keys matched case-insensitively (json-scan.ts `foldKey`); for
   * a field that is a struct ({@link MERGED}) every occurrence, since each
   * one sets only the keys it holds; for any other field the last one. A
   * `null` resets a pointer, slice or map ({@link NULL_RESETS}) and leaves
   * any other field as it was.
   */
  fields(members: JsonMember[], names: readonly string[]): Fields {
    const byFold = new Map(names.map((n) => [foldKey(n), n]));
    const out = new Fields();
    for (const m of members) {
      const name = byFold.get(foldKey(m.key));
      if (name === undefined) continue;
      if (this.b[m.valueStart] === 0x6e) {
        if (NULL_RESETS.has(name)) out.reset(name);
      } else out.assign(name, m, MERGED.has(name));
    }
    return out;
  }

  string(m: JsonMember | undefined, path: string): string {
    if (m === undefined) return "";
    if (this.b[m.valueStart] !== 0x22) throw new SnapshotPayloadError(`${path} must be a string`);
    try {
      return JSON.parse(this.buf.toString("utf8", m.valueStart, m.valueEnd)) as string;
    } catch {
      throw new SnapshotPayloadError(`${path} is not a valid JSON string`);
    }
  }

  int32(m: JsonMember | undefined, path: string): number | undefined {
    if (m === undefined) return undefined;
    const raw = this.buf.toString("latin1", m.valueStart, m.valueEnd);
    if (!/^-?(0|[1-9][0-9]*)$/.test(raw)) throw new SnapshotPayloadError(`${path} must be an integer, got ${raw.slice(0, 40)}`);
    const n = Number(raw);
    if (n < INT32_MIN || n > INT32_MAX) throw new SnapshotPayloadError(`${path} ${raw} does not fit a 32-bit integer`);
    return n;
  }

  /**
   * The members of the object values `occurrences` (a struct field's, see
   * {@link fields}), in order, so that a later key wins as Go's merge
   * would have it; undefined when the field is absent.
   *
   * @throws SnapshotPayloadError naming `path` when a value is not an object or not valid JSON.
   */
  object(occurrences: readonly JsonMember[] | undefined, path: string): JsonMember[] | undefined {
    if (occurrences === undefined) return undefined;
    const members: JsonMember[] = [];
    for (const m of occurrences) {
      if (this.b[m.valueStart] !== 0x7b) throw new SnapshotPayloadError(`${path} must be an object`);
      try {
        members.push(...scanObjectBytes(this.b, m.valueStart, "strict").members);
      } catch (err) {
        if (err instanceof JsonSyntaxError) throw new SnapshotPayloadError(`${path} is not valid JSON: ${err.problem}`);
        throw err;
      }
    }
    return members;
  }
}

const TOP = ["id", "state", "counters", "created_at", "incarnation", "messages", "kind", "relationship", "model_id", "title", "title_provenance", "owner", "environment_ref"] as const;
const TOP_FOLDED = new Set(TOP.map(foldKey));
/** The fold of the snapshot's `id` key. */
const ID_FOLDED = foldKey("id");
const RELATIONSHIP_KEYS: ReadonlyArray<readonly [string, Exclude<keyof SessionRelationship, "branchIndex">]> = [
  ["schedule_name", "scheduleName"],
  ["origin_session_id", "originSessionId"],
  ["origin_incarnation", "originIncarnation"],
  ["parent_session_id", "parentSessionId"],
  ["parent_incarnation", "parentIncarnation"],
  ["call_id", "callId"],
  ["team_id", "teamId"],
  ["member_name", "memberName"],
  ["debug_target_id", "debugTargetSessionId"],
  ["debug_target_incarnation", "debugTargetIncarnation"],
];

function readRelationship(r: Reader, members: JsonMember[] | undefined): SessionRelationship {
  const rel = emptyRelationship();
  if (members === undefined) return rel;
  const f = r.fields(members, [...RELATIONSHIP_KEYS.map(([k]) => k), "branch_index"]);
  for (const [key, prop] of RELATIONSHIP_KEYS) rel[prop] = r.string(f.get(key), `relationship.${key}`);
  rel.branchIndex = r.int32(f.get("branch_index"), "relationship.branch_index");
  return rel;
}

function readOwner(r: Reader, members: JsonMember[] | undefined): SessionOwner | undefined {
  if (members === undefined) return undefined;
  const f = r.fields(members, ["Issuer", "Subject", "GrantType", "Name"]);
  const owner = {
    issuer: r.string(f.get("Issuer"), "owner.Issuer"),
    subject: r.string(f.get("Subject"), "owner.Subject"),
    grantType: r.string(f.get("GrantType"), "owner.GrantType"),
    name: r.string(f.get("Name"), "owner.Name"),
  };
  // The harness refuses to restore such an owner, and its scope would be the shared "invalid" hash.
  if (owner.issuer.includes("\u0000") || owner.subject.includes("\u0000")) throw new SnapshotPayloadError("owner.Issuer and owner.Subject must not contain NUL");
  return owner;
}

function readCreatedAt(text: string): bigint {
  if (text === "") return ZERO_TIME_NANOS;
  try {
    return parseRfc3339(text);
  } catch (err) {
    if (err instanceof TimeFormatError) throw new SnapshotPayloadError(`created_at: ${err.message}`);
    throw err;
  }
}

/**
 * Projects a snapshot payload (spec/session-metadata.md sections 1 and 2;
 * issue 12). Only the top-level members it needs are read; `messages` and
 * every other value are skimmed without being built (see
 * services/json/json-scan.ts), and `messages` is walked only when the write
 * sent no activity.
 *
 * A payload that is not one JSON object, or an object without an `id`
 * member, is not a sessnap object: the projection carries no metadata.
 * Otherwise the fields are read as Go's decoder reads them (keys matched
 * case-insensitively, last one wins, a struct's keys merged, `null` resets
 * only pointers, slices and maps) and values
 * are passed through unchanged; a missing kind becomes `unknown` and a
 * missing incarnation the derived legacy one.
 *
 * @param activityState the write's `activity_state` (already checked to be
 *   `""`, `draft` or `active`); `""` asks for it to be derived.
 * @throws SnapshotPayloadError when the payload's `id` is not `sessionId`
 *   (the message names both), a field has the wrong JSON type, `turns` or
 *   `branch_index` does not fit 32 bits, `created_at` is not RFC 3339, the
 *   incarnation (own or related) is not valid, or the owner's issuer or
 *   subject contains NUL: the write is refused (INVALID_ARGUMENT), as the
 *   harness's own server refuses it.
 */
export function projectSnapshot(sessionId: string, bytes: Uint8Array, activityState: ActivityState): SessionProjection {
  // A Buffer view (no copy): its byte search is native memchr, a plain Uint8Array's is not.
  const payload = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const opaque: SessionProjection = { metadata: undefined, activityState, estimatedBytes: payload.byteLength };
  const top: JsonMember[] = [];
  let derived: ActivityState = "draft";
  try {
    const end = forEachMemberBytes(payload, 0, (keyStart, keyEnd, valueStart) => {
      const key = decodeKeyBytes(payload, keyStart, keyEnd);
      let valueEnd: number;
      if (activityState === "" && payload[valueStart] === 0x5b && keyMatches(key, "messages")) {
        const walked = walkMessages(payload, valueStart);
        derived = walked.activity;
        valueEnd = walked.end;
      } else {
        valueEnd = scanValueBytes(payload, valueStart, 1, "skim");
      }
      if (TOP_FOLDED.has(foldKey(key))) top.push({ key, valueStart, valueEnd });
      return valueEnd;
    });
    expectDocumentEnd(payload, end);
  } catch (err) {
    if (err instanceof JsonSyntaxError) return opaque;
    throw err;
  }
  const r = new Reader(payload);
  if (!top.some((m) => foldKey(m.key) === ID_FOLDED)) return opaque;
  const f = r.fields(top, TOP);
  const id = r.string(f.get("id"), "id");
  if (id !== sessionId) throw new SnapshotPayloadError(`id ${JSON.stringify(id)} differs from session_id ${JSON.stringify(sessionId)}`);

  const owner = readOwner(r, r.object(f.all("owner"), "owner"));
  const ownerScope = principalScopeHash(owner);
  const createdAt = readCreatedAt(r.string(f.get("created_at"), "created_at"));
  let incarnation = r.string(f.get("incarnation"), "incarnation");
  if (incarnation === "") incarnation = legacyIncarnation(sessionId, createdAt, ownerScope);
  else if (!isValidIncarnation(incarnation)) throw new SnapshotPayloadError(`incarnation ${JSON.stringify(incarnation)} is not a valid incarnation id`);

  const relationship = readRelationship(r, r.object(f.all("relationship"), "relationship"));
  for (const [key, value] of [
    ["parent_incarnation", relationship.parentIncarnation],
    ["origin_incarnation", relationship.originIncarnation],
    ["debug_target_incarnation", relationship.debugTargetIncarnation],
  ] as const) {
    if (value !== "" && !isValidIncarnation(value)) throw new SnapshotPayloadError(`relationship.${key} ${JSON.stringify(value)} is not a valid incarnation id`);
  }

  const counters = r.object(f.all("counters"), "counters");
  const env = r.object(f.all("environment_ref"), "environment_ref");
  const ef = r.fields(env ?? [], ["Kind", "ID", "Revision"]);
  const kind = r.string(f.get("kind"), "kind");
  const messages = f.get("messages");
  if (messages !== undefined && payload[messages.valueStart] !== 0x5b) throw new SnapshotPayloadError("messages must be an array");

  return {
    metadata: {
      state: r.string(f.get("state"), "state"),
      turns: (counters === undefined ? undefined : r.int32(r.fields(counters, ["Turns"]).get("Turns"), "counters.Turns")) ?? 0,
      modelId: r.string(f.get("model_id"), "model_id"),
      createdAtNanos: createdAt === ZERO_TIME_NANOS || createdAt < TIMESTAMP_MIN_NANOS || createdAt > TIMESTAMP_MAX_NANOS ? undefined : createdAt,
      title: r.string(f.get("title"), "title"),
      titleProvenance: r.string(f.get("title_provenance"), "title_provenance"),
      kind: kind === "" ? "unknown" : kind,
      relationship,
      owner,
      environmentRef: {
        kind: r.string(ef.get("Kind"), "environment_ref.Kind"),
        id: r.string(ef.get("ID"), "environment_ref.ID"),
        revision: r.string(ef.get("Revision"), "environment_ref.Revision"),
      },
      incarnation,
      ownerScope,
    },
    activityState: activityState !== "" ? activityState : messages === undefined ? "draft" : derived,
    estimatedBytes: payload.byteLength,
  };
}

/**
 * The payload's `id` when its first top-level member is an `id` holding a
 * string (as the harness's encoder writes every snapshot), read without
 * looking further; undefined otherwise (another first member, another
 * value type, not a JSON object). Cheap whatever the payload's size: the
 * service uses it to refuse a large payload naming another session before
 * anything is staged (issue 12). It is only a first look: a later member
 * with the same key (case-insensitively) would win, so the refusal itself
 * is left to {@link projectSnapshot}.
 */
export function leadingId(bytes: Uint8Array): string | undefined {
  const b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let id: string | undefined;
  try {
    forEachMemberBytes(b, 0, (keyStart, keyEnd, valueStart) => {
      if (b[valueStart] === 0x22 && foldKey(decodeKeyBytes(b, keyStart, keyEnd)) === ID_FOLDED) {
        id = JSON.parse(b.toString("utf8", valueStart, scanValueBytes(b, valueStart, 1, "strict"))) as string;
      }
      return STOP_WALK;
    });
  } catch (err) {
    if (err instanceof JsonSyntaxError || err instanceof SyntaxError) return undefined;
    throw err;
  }
  return id;
}

/**
 * The projection of a payload stored by an earlier build, for the upgrade
 * backfill on either backend: activity is derived from `messages`, and a
 * payload today's Save would refuse (another id, a bad incarnation...) is
 * kept as a non-sessnap row rather than failing the upgrade.
 */
export function projectStoredSnapshot(sessionId: string, payload: Uint8Array): SessionProjection {
  try {
    return projectSnapshot(sessionId, payload, "");
  } catch (err) {
    if (err instanceof SnapshotPayloadError) return { metadata: undefined, activityState: "", estimatedBytes: payload.byteLength };
    throw err;
  }
}
