/**
 * Why an event-log read or follow cannot go on, as the store and reader layers
 * report it. Only service.ts turns these into ConnectErrors (status code plus
 * `google.rpc.ErrorInfo` reason, wire-contract.md section 3.7).
 *
 * - `cursor_malformed`: the cursor was not issued by this driver for this
 *   session, or names a position the log does not have (INVALID_ARGUMENT).
 * - `cursor_expired`: the cursor's generation is not the log's current one,
 *   because the log was deleted (and maybe recreated) since (FAILED_PRECONDITION).
 * - `follow_capacity`: the process already holds `--max-followers` follow
 *   streams; nothing was read (RESOURCE_EXHAUSTED).
 * - `follow_lagging`: a live follower fell more than `--follow-buffer` records
 *   behind the tail; it resumes from its last cursor (RESOURCE_EXHAUSTED).
 * - `log_replaced`: the log was deleted or replaced while a legacy Read was
 *   streaming it (ABORTED; Read has no cursor to expire).
 */
export type LogErrorReason = "cursor_malformed" | "cursor_expired" | "follow_capacity" | "follow_lagging" | "log_replaced";

/** A domain failure of the event log with its wire reason; the message never reveals a generation. */
export class LogError extends Error {
  override name = "LogError";

  constructor(
    readonly reason: LogErrorReason,
    message: string,
  ) {
    super(message);
  }
}

/** `cursor_malformed` with `problem` as the message (section 3.6). */
export function cursorMalformed(problem: string): LogError {
  return new LogError("cursor_malformed", `cursor: ${problem}`);
}

/** `cursor_expired`: the log this cursor addressed no longer exists (section 3.6). */
export function cursorExpired(): LogError {
  return new LogError("cursor_expired", "cursor: the event log was deleted or replaced since this cursor was issued; read again from the beginning");
}
