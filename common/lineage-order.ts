import { compareIdBytes } from "./byte-order.js";

/** What the lineage order looks at in a record. */
export interface LineageKey {
  sessionId: string;
  state: string;
  incarnation: string;
}

/**
 * The order of ReadLineage records (spec/session-metadata.md section 5.3;
 * wire-contract.md section 2.5): records of the root id first, then by id,
 * `retained` before `pruned` for one id, then by incarnation; ids and
 * incarnations compared byte-wise. Negative when `a` comes first.
 */
export function compareLineage(rootSessionId: string, a: LineageKey, b: LineageKey): number {
  const aRoot = a.sessionId === rootSessionId;
  if (aRoot !== (b.sessionId === rootSessionId)) return aRoot ? -1 : 1;
  const byId = compareIdBytes(a.sessionId, b.sessionId);
  if (byId !== 0) return byId;
  if (a.state !== b.state) return a.state === "retained" ? -1 : 1;
  return compareIdBytes(a.incarnation, b.incarnation);
}
