/**
 * Work other branches are doing that some tests are already written against
 * (issue 15). A test guarded by one of these runs once the flag is false: the
 * lead sets it to false when this branch meets that work, and the guarded
 * assertions must then pass. `grep -rn WAITING_FOR test/` lists every guarded
 * test.
 *
 * - `exactlyOnce` (issue 9, branch `exactly-once`, already on main at
 *   5bf9270): a Redis that is unreachable, or not durable in strict mode,
 *   answers UNAVAILABLE, never INTERNAL.
 * - `failureCodes` (issue 9, branch `failure-codes`): SQLite failures are
 *   classified: a full disk is RESOURCE_EXHAUSTED, a store that stays busy
 *   (write lock held elsewhere) UNAVAILABLE, never INTERNAL.
 */
export const WAITING_FOR = {
  exactlyOnce: true,
  failureCodes: true,
} as const;
