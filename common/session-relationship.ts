import { isValidIncarnation } from "./incarnation.js";

/**
 * How a session relates to others (spec/session-metadata.md section 1.6),
 * with the wire's field names. Empty strings mean "not set"; `branchIndex` is
 * undefined when unset (0 is a real index).
 */
export interface SessionRelationship {
  scheduleName: string;
  originSessionId: string;
  originIncarnation: string;
  parentSessionId: string;
  parentIncarnation: string;
  callId: string;
  branchIndex: number | undefined;
  teamId: string;
  memberName: string;
  debugTargetSessionId: string;
  debugTargetIncarnation: string;
}

/** A relationship with every field unset. */
export function emptyRelationship(): SessionRelationship {
  return {
    scheduleName: "",
    originSessionId: "",
    originIncarnation: "",
    parentSessionId: "",
    parentIncarnation: "",
    callId: "",
    branchIndex: undefined,
    teamId: "",
    memberName: "",
    debugTargetSessionId: "",
    debugTargetIncarnation: "",
  };
}

/** The session kinds the harness writes (spec/session-metadata.md section 1.2); an empty kind is projected as `unknown`. */
export const SESSION_KINDS = ["unknown", "main", "scheduled", "subagent", "parallel_branch", "team_member", "debug"] as const;

type RelationshipField = keyof SessionRelationship;

/** Every relationship field, in the wire's naming. */
const FIELDS: readonly RelationshipField[] = [
  "scheduleName",
  "originSessionId",
  "originIncarnation",
  "parentSessionId",
  "parentIncarnation",
  "callId",
  "branchIndex",
  "teamId",
  "memberName",
  "debugTargetSessionId",
  "debugTargetIncarnation",
];

/**
 * The relationship fields of any object that carries them under the wire's
 * names (a `SessionMetadataEntry`, a `SessionLineageEntry`), and nothing else.
 */
export function relationshipOf(x: Omit<SessionRelationship, "branchIndex"> & { branchIndex?: number | undefined }): SessionRelationship {
  const rel = emptyRelationship();
  for (const f of FIELDS) (rel as unknown as Record<string, unknown>)[f] = x[f];
  return rel;
}

/** Per kind: the relationship fields it requires and the ones it may carry (section 1.6). */
const RULES: Record<string, { required: RelationshipField[]; optional: RelationshipField[] }> = {
  unknown: { required: [], optional: [] },
  main: { required: [], optional: [] },
  scheduled: { required: ["scheduleName"], optional: ["originSessionId", "originIncarnation"] },
  subagent: { required: ["parentSessionId", "callId"], optional: ["parentIncarnation"] },
  parallel_branch: { required: ["parentSessionId", "callId", "branchIndex"], optional: ["parentIncarnation"] },
  team_member: { required: ["teamId", "memberName"], optional: ["parentSessionId", "parentIncarnation"] },
  debug: { required: ["debugTargetSessionId"], optional: ["debugTargetIncarnation"] },
};

const RELATED: Array<[RelationshipField, RelationshipField]> = [
  ["parentSessionId", "parentIncarnation"],
  ["originSessionId", "originIncarnation"],
  ["debugTargetSessionId", "debugTargetIncarnation"],
];

function isSet(rel: SessionRelationship, field: RelationshipField): boolean {
  return field === "branchIndex" ? rel.branchIndex !== undefined && rel.branchIndex >= 0 : rel[field] !== "";
}

/**
 * The harness's `ValidateSessionMetadata` (spec/session-metadata.md section
 * 1.6): what is wrong with `kind` and `rel` together, or undefined when they
 * are valid. An empty kind counts as `unknown`. The harness's client refuses
 * a lineage record that fails this check.
 */
export function relationshipProblem(kind: string, rel: SessionRelationship): string | undefined {
  const rules = RULES[kind === "" ? "unknown" : kind];
  if (rules === undefined) return `unknown session kind ${JSON.stringify(kind)}`;
  for (const f of rules.required) if (!isSet(rel, f)) return `kind ${kind} requires ${f}`;
  for (const f of FIELDS) {
    const present = f === "branchIndex" ? rel.branchIndex !== undefined : rel[f] !== "";
    if (present && !rules.required.includes(f) && !rules.optional.includes(f)) return `kind ${kind} does not allow ${f}`;
  }
  for (const [id, inc] of RELATED) {
    const incarnation = rel[inc] as string;
    if (incarnation !== "" && (rel[id] === "" || !isValidIncarnation(incarnation))) return `${inc} ${JSON.stringify(incarnation)} is not a valid incarnation of a named session`;
  }
  return undefined;
}

/**
 * True when a lineage record with relationship `rel` is directly related to
 * the root incarnation: its parent, origin or debug target is exactly
 * (rootId, rootIncarnation) (spec/session-metadata.md section 5.3).
 */
export function directlyRelated(rel: SessionRelationship, rootId: string, rootIncarnation: string): boolean {
  return RELATED.some(([id, inc]) => rel[id] === rootId && rel[inc] === rootIncarnation);
}
