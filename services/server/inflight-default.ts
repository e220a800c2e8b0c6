import { totalmem } from "node:os";
import { GRPC_PREFIX_BYTES } from "./grpc-request-watch.js";
import { HELD_COPIES } from "./inflight-budget.js";
import { MAX_MESSAGE_BYTES } from "./server.js";

/**
 * The smallest default `--max-inflight-bytes`, in bytes (195 MiB): what the
 * budget charges one call of the largest size, so that such a call is always
 * admitted when nothing else is in flight. A call's request and answer
 * together hold at most one largest message, {@link MAX_MESSAGE_BYTES} (the
 * harness's 64 MiB plus 1 MiB of headroom), plus the request's
 * {@link GRPC_PREFIX_BYTES}: a large request (Save, Create, Append) has an
 * empty or small answer, and a large answer (Load, List, ListSchedules) a
 * request of an id or less, within the headroom. Both are charged
 * {@link HELD_COPIES} times (inflight-budget.ts), so a 64 MiB Save needs
 * three times its size; the previous floor of two messages (130 MiB) refused
 * it at once on a host with less than about 780 MiB.
 */
export const MIN_DEFAULT_INFLIGHT_BYTES = HELD_COPIES * (MAX_MESSAGE_BYTES + GRPC_PREFIX_BYTES);

/**
 * The default `--max-inflight-bytes` for a process that may use
 * `memoryBytes`: a quarter of it, and at least
 * {@link MIN_DEFAULT_INFLIGHT_BYTES}, so a maximum-size call fits however
 * small the host (README "Limits"; `serve --help`).
 *
 * @param memoryBytes memory the process may use, in bytes ({@link availableMemoryBytes}).
 * @returns the budget in bytes.
 */
export function defaultInflightBytesFor(memoryBytes: number): number {
  return Math.max(Math.floor(memoryBytes / 4), MIN_DEFAULT_INFLIGHT_BYTES);
}

/**
 * Memory this process may use, in bytes: the cgroup limit when there is one
 * (`process.constrainedMemory()`, 0 when none), at most the machine's memory.
 */
export function availableMemoryBytes(): number {
  const constrained = process.constrainedMemory?.() ?? 0;
  return constrained > 0 ? Math.min(constrained, totalmem()) : totalmem();
}

/** Default `--max-inflight-bytes` of this process: {@link defaultInflightBytesFor} its {@link availableMemoryBytes}. */
export function defaultMaxInflightBytes(): number {
  return defaultInflightBytesFor(availableMemoryBytes());
}
