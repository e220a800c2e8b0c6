import type { SessionProjection } from "./projection.js";

/**
 * The projection a write is stored with, as a store receives it (issue 12):
 * computed already, or a function computing it. A function lets a store
 * project while it writes something else: SQLite stages a payload above
 * 1 MiB chunk by chunk and projects while the writer worker writes the first
 * chunk (sqlite.ts). A store calls the function at most once per write, and
 * always before the write is visible; whatever it throws (the service's
 * INVALID_ARGUMENT for a payload the projection refuses) is the write's
 * answer, and nothing is changed.
 */
export type ProjectionSource = SessionProjection | (() => SessionProjection);

/**
 * `source` as a function that runs it once: the first call computes the
 * projection (or throws what it throws), every later call answers that same
 * projection (or throws that same error) without computing it again.
 */
export function projectionOnce(source: ProjectionSource): () => SessionProjection {
  if (typeof source !== "function") return () => source;
  let outcome: { ok: true; value: SessionProjection } | { ok: false; error: unknown } | undefined;
  return () => {
    if (outcome === undefined) {
      try {
        outcome = { ok: true, value: source() };
      } catch (error) {
        outcome = { ok: false, error };
      }
    }
    if (!outcome.ok) throw outcome.error;
    return outcome.value;
  };
}
