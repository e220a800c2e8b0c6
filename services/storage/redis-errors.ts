import { StoreFailure } from "./store-failure.js";
import { ReplicaShortfall } from "./redis-script.js";
import { SlotUnserved } from "./redis-cluster-durability.js";
import { RedisWindowTimeout } from "./redis-write-window.js";

/**
 * What one failed Redis attempt means for the operation it belongs to
 * (issue 9 deliverable 2):
 *
 * - `retry`: a passing condition (not connected, connection lost, no answer,
 *   Redis loading its data, a read-only replica, a busy script); try again
 *   with the same operation id until `--store-timeout` runs out. `sent` is
 *   true when the command may have reached Redis and been applied
 *   (connection lost or no answer after it was written), false when it was
 *   certainly not applied (never written, or refused with an error reply).
 *   `cause` is a short phrase for the caller's message.
 * - `fail`: an infrastructure condition a retry within the timeout will not
 *   fix; the failure is final and nothing was applied by this attempt.
 * - `bug`: anything else (a Lua error, a malformed reply): not an
 *   infrastructure condition, so it stays INTERNAL.
 */
export type RedisErrorClass =
  | { kind: "retry"; sent: boolean; cause: string }
  | { kind: "fail"; failure: StoreFailure }
  | { kind: "bug" };

/** Thrown by an attempt that got no answer within the time left to its operation. */
export class RedisAttemptTimeout extends Error {
  override name = "RedisAttemptTimeout";
}

/** Error replies that mean "not now", never "applied": the command did not run. */
const PASSING_REPLY: Array<[RegExp, string]> = [
  [/^LOADING\b/, "Redis is loading its data"],
  [/^MASTERDOWN\b/, "the replica lost its primary"],
  [/^TRYAGAIN\b/, "a hash slot of the Redis cluster is being migrated"],
  [/^CLUSTERDOWN\b/, "the Redis cluster is down (a hash slot has no reachable primary)"],
  // A redirection the cluster client did not follow (a pipeline on one node, see redis-script.ts runScriptAndWait).
  [/^(MOVED|ASK) \d+ /, "the Redis cluster moved the slot"],
  [/^BUSY\b/, "Redis is busy running a script"],
];

/**
 * ioredis's messages for a command it never wrote, or that Redis refused
 * without running it: the offline queue is off and the connection is not
 * ready; the cluster client is not ready (no offline queue either); or the
 * cluster client gave up following redirections (MOVED, ASK, TRYAGAIN and
 * CLUSTERDOWN all mean the command was not run), e.g. while a slot migrates;
 * or a cluster client (the bulk reader's, redis-bulk-reader.ts, opened on
 * first use) could not connect to any node, or not learn the slot map, as
 * while a primary is being replaced, or its connect was overtaken by another
 * connect or a close (the last two: ioredis's cluster `connect()` only).
 */
const NOT_SENT =
  /^Stream isn't writeable|^Cluster isn't ready|^Too many Cluster redirections|^None of startup nodes is available|^Failed to refresh slots cache|^Connection is discarded because a new connection is made|^Connection is aborted$/;

/**
 * ioredis's refusal of an auto-pipeline whose commands' slots it maps to
 * different nodes, raised before any of it is written. It happens while a
 * cluster fails over: a MOVED reply changes the node of the moved slot in
 * the node list that every slot of its old range shares, until the slot
 * map is read again, so reads of neighbouring slots batched together in
 * that moment look split. A pipeline that ioredis re-sends after a
 * redirection fails the same way, and it re-sends only when no write of it
 * ran. So nothing was applied, and a retry (after the map is read again)
 * succeeds. Found by a helper who reproduced the INTERNAL Loads of a
 * failover test: ioredis 6.0, cluster/index.js and Pipeline.js.
 */
const SPLIT_PIPELINE = /^All keys in the pipeline should belong to the same slots allocation group/;

/**
 * ioredis's messages for a command that may have been written before the
 * connection failed: MaxRetriesPerRequestError (connectRedis sets
 * `maxRetriesPerRequest: 0`, so every command in flight gets it when the
 * connection closes), "Socket timeout" (no data for `socketTimeout`), and
 * "Connection is closed." (the client was closed; a command in flight then
 * gets it too, so it cannot prove the command unsent), and "Command aborted
 * due to connection close" (a command of an auto-pipeline that was cut short).
 */
const MAYBE_SENT = /^(?:\w*Error: )?(?:Reached the max retries per request|Socket timeout\b|Connection is closed\.|Command aborted due to connection close)|ECONNRESET|EPIPE|ETIMEDOUT/;

/**
 * Error replies by which Redis refuses every write while it cannot take
 * writes at all, in the order they are matched: what health says of the
 * node (see {@link writeRefusalCause}), and what the attempt means for its
 * operation (READONLY passes, as a failover may promote another primary;
 * the others are final, nothing written).
 */
const REFUSAL_REPLY: Array<[RegExp, string, (err: Error) => RedisErrorClass]> = [
  [/^READONLY\b/, "it is a read-only replica (READONLY)", () => ({ kind: "retry", sent: false, cause: "the Redis server is a read-only replica" })],
  [
    /\bMISCONF\b[\s\S]*no space left/i,
    "no space left on its disk (MISCONF)",
    (err) => ({ kind: "fail", failure: new StoreFailure("disk_full", "Redis cannot write its persistence files: no space left on its disk; nothing was written", { cause: err }) }),
  ],
  [/\bMISCONF\b/, "it cannot persist writes (MISCONF)", (err) => ({ kind: "fail", failure: new StoreFailure("not_durable", "Redis cannot persist writes right now (MISCONF); nothing was written", { cause: err }) })],
  [/\bOOM\b/, "maxmemory reached (OOM)", (err) => ({ kind: "fail", failure: new StoreFailure("disk_full", "Redis maxmemory reached; nothing was written", { cause: err }) })],
  [/\bNOREPLICAS\b/, "too few replicas in sync (NOREPLICAS)", (err) => ({ kind: "fail", failure: new StoreFailure("not_durable", "Redis has too few replicas to accept writes; nothing was written", { cause: err }) })],
];

/**
 * What a write's error says about the node that refused it (issue 9: health
 * NOT_SERVING while writes cannot succeed): for an error reply by which Redis
 * refuses every write, not this one alone (READONLY: the node is a replica;
 * MISCONF: it cannot persist, `no space left` when its disk is full; OOM:
 * maxmemory reached; NOREPLICAS: `min-replicas-to-write` not met; also
 * inside a script), a short phrase for health, e.g. `maxmemory reached
 * (OOM)`; undefined for any other error. Used by redis-write-refusal.ts.
 */
export function writeRefusalCause(err: unknown): string | undefined {
  if (!(err instanceof Error) || err.name !== "ReplyError") return undefined;
  return REFUSAL_REPLY.find(([pattern]) => pattern.test(err.message))?.[1];
}

/**
 * Classifies an error thrown by one Redis attempt (ioredis command, script
 * or MULTI) as {@link RedisErrorClass}. A {@link StoreFailure} (the write
 * guard's `not_durable`) is final. A {@link ReplicaShortfall} (fewer
 * replicas than `--redis-wait-replicas` acknowledged) is passing and sent. Error replies are read from their text:
 * `MISCONF` (Redis cannot persist) is `not_durable`, or `disk_full` when the
 * text says no space is left on the device; `OOM` (maxmemory reached) and
 * `NOREPLICAS` are final too. Errors raised inside a script keep the reply's
 * code in their text, so they are recognised the same way.
 */
export function classifyRedisError(err: unknown): RedisErrorClass {
  if (err instanceof StoreFailure) return { kind: "fail", failure: err };
  if (err instanceof RedisAttemptTimeout) return { kind: "retry", sent: true, cause: "no answer" };
  if (err instanceof SlotUnserved) return { kind: "retry", sent: false, cause: err.message };
  if (err instanceof RedisWindowTimeout) return { kind: "retry", sent: false, cause: "earlier writes to Redis were not answered" };
  // Applied on the primary (and recorded): a retry replays the record and waits again.
  if (err instanceof ReplicaShortfall) return { kind: "retry", sent: true, cause: err.message };
  if (!(err instanceof Error)) return { kind: "bug" };
  const message = err.message;
  if (err.name === "ReplyError") {
    if (/^EXECABORT\b/.test(message)) return execAborted(err);
    for (const [pattern, cause] of PASSING_REPLY) if (pattern.test(message)) return { kind: "retry", sent: false, cause };
    return REFUSAL_REPLY.find(([pattern]) => pattern.test(message))?.[2](err) ?? { kind: "bug" };
  }
  if (/^Too many Cluster redirections/.test(message)) {
    // The client stops after 16 errors in a row and reports the last one, which decides.
    const last = message.slice(message.indexOf("Last error:") + "Last error:".length).trim();
    return { kind: "retry", sent: MAYBE_SENT.test(last), cause: "the Redis cluster is moving the slot" };
  }
  if (SPLIT_PIPELINE.test(message)) return { kind: "retry", sent: false, cause: "the Redis cluster moved a slot and the client is reading the slot map again" };
  if (NOT_SENT.test(message)) return { kind: "retry", sent: false, cause: "not connected" };
  if (MAYBE_SENT.test(message)) return { kind: "retry", sent: true, cause: "connection lost" };
  return { kind: "bug" };
}

/**
 * A MULTI that Redis discarded at EXEC (`EXECABORT`) because a command
 * queued in it was refused: none of it ran. ioredis puts the refusals on
 * the error (`previousErrors`); the first decides, as if it were the
 * attempt's own error (say CLUSTERDOWN or MOVED while a primary is
 * replaced: a retry, nothing sent). Anything else is a bug.
 */
function execAborted(err: Error): RedisErrorClass {
  const first = (err as Error & { previousErrors?: unknown[] }).previousErrors?.[0];
  const c = first === undefined ? undefined : classifyRedisError(first);
  return c?.kind === "retry" ? { kind: "retry", sent: false, cause: c.cause } : { kind: "bug" };
}

/**
 * Rejects with {@link RedisAttemptTimeout} when `p` has not settled within `ms`; `p` settling later is ignored.
 * Bounds one Redis attempt (redis-operation.ts) or probe (redis-write-refusal.ts) by `--store-timeout`.
 */
export function withinMs<T>(p: Promise<T>, ms: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new RedisAttemptTimeout(`no answer within ${Math.round(ms)} ms`)), ms);
    p.then(
      (v) => (clearTimeout(timer), resolve(v)),
      (e: unknown) => (clearTimeout(timer), reject(e)),
    );
  });
}
