import { createHash } from "node:crypto";

/** A session owner's identity: the exact (issuer, subject) pair (spec/session-metadata.md section 1.7). */
export interface PrincipalIdentity {
  issuer: string;
  subject: string;
}

/** Length of a principal scope hash in bytes (SHA-256; wire-contract.md section 2.2, `owner_scope`). */
export const PRINCIPAL_SCOPE_BYTES = 32;

/**
 * The harness's `PrincipalScopeHash` (spec/session-metadata.md section 3.1),
 * 32 raw bytes:
 * - no owner: SHA-256 of the empty string;
 * - an owner whose issuer or subject contains NUL: SHA-256 of
 *   `mecatl:invalid-principal-scope`;
 * - otherwise SHA-256(UTF-8(issuer) ‖ 0x00 ‖ UTF-8(subject)).
 *
 * It is a lineage record's `owner_scope` and keys the owner scopes of
 * PageMetadata (`owner:<hex>`).
 */
export function principalScopeHash(owner: PrincipalIdentity | undefined): Buffer {
  const h = createHash("sha256");
  if (owner === undefined) return h.digest();
  if (owner.issuer.includes("\u0000") || owner.subject.includes("\u0000")) return h.update("mecatl:invalid-principal-scope").digest();
  return h.update(owner.issuer, "utf8").update(Buffer.of(0)).update(owner.subject, "utf8").digest();
}
