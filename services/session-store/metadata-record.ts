import type { SessionMetadata } from "./projection.js";

/**
 * The stored form of a {@link SessionMetadata}: compact JSON text, the same on
 * SQLite (column `session_metadata.metadata`) and Redis (hash field `meta`).
 * `createdAtNanos` is written as a decimal string, `ownerScope` as hex, and
 * an unset `branchIndex` is left out.
 */
export function encodeMetadata(m: SessionMetadata): string {
  return JSON.stringify({ ...m, createdAtNanos: m.createdAtNanos?.toString(), ownerScope: Buffer.from(m.ownerScope).toString("hex") });
}

/**
 * Reads what {@link encodeMetadata} wrote.
 *
 * @throws SyntaxError when the text is not such a record (a corrupt store).
 */
export function decodeMetadata(text: string): SessionMetadata {
  const raw = JSON.parse(text) as Omit<SessionMetadata, "createdAtNanos" | "ownerScope"> & { createdAtNanos?: string; ownerScope: string };
  return {
    ...raw,
    relationship: { ...raw.relationship, branchIndex: raw.relationship.branchIndex ?? undefined },
    createdAtNanos: raw.createdAtNanos === undefined ? undefined : BigInt(raw.createdAtNanos),
    ownerScope: Buffer.from(raw.ownerScope, "hex"),
  };
}

/** The paging owner key of a row: lowercase hex of the owner's scope hash, or undefined for an ownerless (or non-sessnap) session. */
export function ownerScopeHex(m: SessionMetadata | undefined): string | undefined {
  return m?.owner === undefined ? undefined : Buffer.from(m.ownerScope).toString("hex");
}
