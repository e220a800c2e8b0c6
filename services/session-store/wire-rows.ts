import type { MessageInitShape } from "@bufbuild/protobuf";
import type { SessionLineageEntrySchema, SessionMetadataEntrySchema } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { microsToTimestamp, nanosToTimestamp } from "../rpc/timestamp.js";
import type { LineageRecord, MetadataRow } from "./store.js";

/**
 * A stored metadata row as the wire's `SessionMetadataEntry`
 * (spec/session-metadata.md section 2.1): owner fields only with
 * `has_owner`, `branch_index` only when set, `created_at` only when non-zero,
 * `environment_ref` always for a sessnap row. A non-sessnap row carries only
 * id, save time, size and the activity its write sent.
 */
export function metadataEntry(row: MetadataRow): MessageInitShape<typeof SessionMetadataEntrySchema> {
  const base = {
    sessionId: row.sessionId,
    modifiedAt: microsToTimestamp(row.modifiedAtMicros),
    estimatedBytes: BigInt(row.estimatedBytes),
    activityState: row.activityState,
  };
  const m = row.metadata;
  if (m === undefined) return base;
  const owner = m.owner;
  return {
    ...base,
    ...m.relationship,
    state: m.state,
    turns: m.turns,
    modelId: m.modelId,
    createdAt: m.createdAtNanos === undefined ? undefined : nanosToTimestamp(m.createdAtNanos),
    title: m.title,
    titleProvenance: m.titleProvenance,
    kind: m.kind,
    hasOwner: owner !== undefined,
    ownerIssuer: owner?.issuer ?? "",
    ownerSubject: owner?.subject ?? "",
    ownerGrantType: owner?.grantType ?? "",
    ownerName: owner?.name ?? "",
    environmentRef: m.environmentRef,
  };
}

/**
 * A stored lineage record as the wire's `SessionLineageEntry`
 * (spec/session-metadata.md section 5.3): `deleted_at` exactly when pruned,
 * `branch_index` only when set, `owner_scope` the 32 raw bytes.
 */
export function lineageEntry(r: LineageRecord): MessageInitShape<typeof SessionLineageEntrySchema> {
  return {
    ...r.relationship,
    sessionId: r.sessionId,
    incarnation: r.incarnation,
    kind: r.kind,
    ownerScope: r.ownerScope,
    state: r.state,
    deletedAt: r.deletedAtMicros === undefined ? undefined : microsToTimestamp(r.deletedAtMicros),
  };
}

/** A rough upper bound of the encoded size of a metadata entry in bytes, for bounding a page's answer. */
export function metadataEntryBytes(row: MetadataRow): number {
  const m = row.metadata;
  if (m === undefined) return 64 + row.sessionId.length * 3;
  const r = m.relationship;
  const strings = [
    row.sessionId,
    m.state,
    m.modelId,
    m.title,
    m.titleProvenance,
    m.kind,
    m.owner?.issuer ?? "",
    m.owner?.subject ?? "",
    m.owner?.grantType ?? "",
    m.owner?.name ?? "",
    m.environmentRef.kind,
    m.environmentRef.id,
    m.environmentRef.revision,
    r.scheduleName,
    r.originSessionId,
    r.originIncarnation,
    r.parentSessionId,
    r.parentIncarnation,
    r.callId,
    r.teamId,
    r.memberName,
    r.debugTargetSessionId,
    r.debugTargetIncarnation,
  ];
  // Each string field costs a tag and a length prefix (at most 6 bytes) plus at most 3 bytes per UTF-16 unit.
  return 128 + strings.reduce((n, s) => n + 6 + s.length * 3, 0);
}
