/**
 * Work other branches are doing that some tests are already written against
 * (issue 15). A test guarded by one of these runs once the flag is false: the
 * lead sets it to false when merging that branch, and the guarded assertions
 * must then pass. `grep -rn WAITING_FOR test/` lists every guarded test.
 *
 * - `failureCodes` (issue 9, branch `failure-codes`): infrastructure failures
 *   answer UNAVAILABLE / RESOURCE_EXHAUSTED, never INTERNAL (a full disk is
 *   RESOURCE_EXHAUSTED; a refused non-durable write, a busy or unreachable
 *   store UNAVAILABLE).
 */
export const WAITING_FOR = {
  failureCodes: true,
} as const;
