import { canonicalJson } from "../storage/copy/canonical.js";
import type { KindFormat } from "../storage/copy/kind-store.js";
import type { ActivityState } from "./activity.js";
import { decodeMetadata, encodeMetadata } from "./metadata-record.js";
import { projectStoredSnapshot, type SessionProjection } from "./projection.js";
import type { LineageRecord } from "./store.js";

/**
 * A session as `mecatl-drivers copy` moves it (issue 14): the snapshot
 * verbatim with its save time (microseconds since the epoch), and its
 * metadata row as stored: the activity its write sent, its size, and the
 * projected fields as the JSON text of metadata-record.ts (undefined for a
 * non-sessnap payload, which has only id, time and size).
 */
export interface SessionCopy {
  sessionId: string;
  format: string;
  payload: Uint8Array;
  modifiedAtMicros: number;
  activityState: ActivityState;
  estimatedBytes: number;
  metadata: string | undefined;
}

/** The {@link SessionProjection} a copied session is stored with: its row as the source held it. */
export function copiedProjection(s: SessionCopy): SessionProjection {
  return { metadata: s.metadata === undefined ? undefined : decodeMetadata(s.metadata), activityState: s.activityState, estimatedBytes: s.estimatedBytes };
}

/**
 * The row of a session whose store has none yet (a Redis store written by a
 * build before issue 12 and not yet opened by a server since): projected from
 * its payload exactly as the start-up backfill would.
 */
export function projectedRow(sessionId: string, payload: Uint8Array): Pick<SessionCopy, "activityState" | "estimatedBytes" | "metadata"> {
  const p = projectStoredSnapshot(sessionId, payload);
  return { activityState: p.activityState, estimatedBytes: p.estimatedBytes, metadata: p.metadata === undefined ? undefined : encodeMetadata(p.metadata) };
}

/** Copy format of sessions: one record per session; digest over every field, the metadata compared as JSON. */
export const sessionCopyFormat: KindFormat<SessionCopy> = {
  kind: "sessions",
  id: (s) => s.sessionId,
  label: (id) => id,
  count: () => 1,
  bytes: (s) => s.payload.byteLength,
  items: (s) => [[s.sessionId, s.format, s.payload, s.modifiedAtMicros, s.activityState, s.estimatedBytes, s.metadata === undefined ? undefined : canonicalJson(s.metadata)]],
};

/**
 * The id of a lineage record in a copy: the session id's UTF-8 length as 8
 * hex digits, the id, then the incarnation (one spelling for every pair, and
 * the record key the Redis store already uses).
 */
export function lineageCopyId(sessionId: string, incarnation: string): string {
  return Buffer.byteLength(sessionId, "utf8").toString(16).padStart(8, "0") + sessionId + incarnation;
}

/** Copy format of lineage records (tombstones included): every field, the relationship field by field. */
export const lineageCopyFormat: KindFormat<LineageRecord> = {
  kind: "lineage",
  id: (r) => lineageCopyId(r.sessionId, r.incarnation),
  label: (id) => {
    const { sessionId, incarnation } = parseLineageCopyId(id);
    return `${sessionId} ${incarnation}`;
  },
  count: () => 1,
  bytes: () => 0,
  items: (r) => {
    const rel = r.relationship;
    return [
      [
        r.sessionId,
        r.incarnation,
        r.kind,
        rel.scheduleName,
        rel.originSessionId,
        rel.originIncarnation,
        rel.parentSessionId,
        rel.parentIncarnation,
        rel.callId,
        rel.branchIndex,
        rel.teamId,
        rel.memberName,
        rel.debugTargetSessionId,
        rel.debugTargetIncarnation,
        r.ownerScope,
        r.state,
        r.deletedAtMicros,
      ],
    ];
  },
};

/** Splits a {@link lineageCopyId} into its session id and incarnation. */
export function parseLineageCopyId(id: string): { sessionId: string; incarnation: string } {
  const b = Buffer.from(id, "utf8");
  const length = Number.parseInt(b.toString("latin1", 0, 8), 16);
  return { sessionId: b.toString("utf8", 8, 8 + length), incarnation: b.toString("utf8", 8 + length) };
}
