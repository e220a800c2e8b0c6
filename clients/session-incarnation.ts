import { legacyIncarnation } from "../common/incarnation.js";
import { principalScopeHash } from "../common/principal-scope.js";
import { parseRfc3339 } from "./time.js";

/** Go's zero time (`0001-01-01T00:00:00Z`) in nanoseconds since the epoch: a missing `created_at`. */
const ZERO_TIME_NANOS = -62_135_596_800n * 1_000_000_000n;

/**
 * The incarnation of the session a `sessnap-json/1` payload holds
 * (spec/session-metadata.md section 1.5): its `incarnation`, or, when that is
 * empty, the legacy id the harness derives from the id, `created_at` and
 * owner. This is the root incarnation ReadLineage wants for the session's
 * current life.
 *
 * @throws SyntaxError when the payload is not JSON; RangeError when
 *   `created_at` is not RFC 3339.
 */
export function incarnationOfSnapshot(sessionId: string, payload: Uint8Array): string {
  const s = JSON.parse(Buffer.from(payload).toString("utf8")) as { incarnation?: string; created_at?: string; owner?: { Issuer?: string; Subject?: string } | null };
  if (typeof s.incarnation === "string" && s.incarnation !== "") return s.incarnation;
  const owner = s.owner == null ? undefined : { issuer: s.owner.Issuer ?? "", subject: s.owner.Subject ?? "" };
  return legacyIncarnation(sessionId, parseRfc3339(s.created_at) ?? ZERO_TIME_NANOS, principalScopeHash(owner));
}
