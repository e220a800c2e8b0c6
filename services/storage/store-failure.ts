/**
 * Why a store could not do what it was asked, when the cause lies in the
 * infrastructure rather than in the request (docs/DESIGN.md principle 2, issue 9):
 *
 * - `unreachable`: the backend could not be reached, or did not answer within
 *   `--store-timeout`, before anything was sent that could change it; nothing
 *   was written. gRPC `UNAVAILABLE`.
 * - `outcome_unknown`: a write was sent but its answer never came back within
 *   `--store-timeout` (connection lost, backend stalled); it may or may not
 *   have been applied. gRPC `UNAVAILABLE`, saying so.
 * - `not_durable`: the backend is reachable but cannot currently promise that
 *   an acknowledged write survives a crash (Redis without `appendfsync
 *   always`, a durability check that did not finish); nothing was written.
 *   gRPC `UNAVAILABLE`.
 * - `disk_full`: the backend's disk (or memory limit) is full; nothing was
 *   written. gRPC `RESOURCE_EXHAUSTED`.
 * - `io_error`: the backend failed to read or write its files; nothing was
 *   written (the transaction rolled back). gRPC `UNAVAILABLE`.
 */
export type StoreFailureKind = "unreachable" | "outcome_unknown" | "not_durable" | "disk_full" | "io_error";

/** Every {@link StoreFailureKind}, in a fixed order (metric labels, docs). */
export const STORE_FAILURE_KINDS: readonly StoreFailureKind[] = ["unreachable", "outcome_unknown", "not_durable", "disk_full", "io_error"];

/**
 * An infrastructure failure of a store, classified by {@link kind}. Stores
 * throw it; the RPC layer (services/rpc/errors.ts `toConnectError`) turns it
 * into `UNAVAILABLE` or `RESOURCE_EXHAUSTED` with {@link message}, never
 * `INTERNAL`. The message is for operators and callers: it says what happened
 * and whether the write may have been applied, and never carries payloads.
 */
export class StoreFailure extends Error {
  override name = "StoreFailure";

  /**
   * @param kind the class of failure (decides the status code).
   * @param message one sentence for the caller, e.g. `Redis did not answer within 2000 ms; nothing was written`.
   * @param cause the underlying error, kept for logs only.
   */
  constructor(
    readonly kind: StoreFailureKind,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** True when `err` is a {@link StoreFailure} (of any kind, or of `kind`). */
export function isStoreFailure(err: unknown, kind?: StoreFailureKind): err is StoreFailure {
  return err instanceof StoreFailure && (kind === undefined || err.kind === kind);
}
