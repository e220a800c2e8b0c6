import type { RedisClient } from "./redis-client.js";
import pRetry, { AbortError } from "p-retry";
import { classifyRedisError, RedisAttemptTimeout, withinMs } from "./redis-errors.js";
import { replicaWait } from "./redis-replicas.js";
import { reconnectCause } from "./redis-reconnect-cause.js";
import { opRecordTtlMs, ReplicaShortfall, runScript, runScriptAndWait, runScriptBuffer, type OpRecord, type RedisScript } from "./redis-script.js";
import { StoreFailure } from "./store-failure.js";
import { randomHexId } from "./random-id.js";
import { writeRefusals } from "./redis-write-refusal.js";
import { RedisWindowTimeout, writeWindow, type RedisWriteWindow } from "./redis-write-window.js";

type ScriptArg = string | Buffer | Uint8Array | number;

/**
 * The Redis work of one RPC (issue 9 deliverables 1 and 2): one operation
 * id, one deadline, one verdict.
 *
 * - {@link id} is a fresh random operation id; every write script the
 *   operation runs is given the record key built from it
 *   ({@link record}), on every attempt, so a write whose reply was lost and
 *   that is sent again is applied once (`OP_RECORD_LUA` in redis-script.ts).
 * - Every Redis request ({@link read}, {@link script}) is retried on a
 *   passing failure (not connected, connection lost, no answer, LOADING,
 *   READONLY: redis-errors.ts) with a short randomised backoff (p-retry)
 *   until `timeoutMs` (`--store-timeout`) has passed since the operation
 *   began, counting every request and retry of it; an attempt that would
 *   outlive that deadline is cut short there, and no retry is started with
 *   less than a quarter of the timeout (at most 250 ms) left, so that the
 *   verdict rests on an answer rather than on a command cut off unanswered.
 * - When the time is up it throws {@link StoreFailure}: `outcome_unknown`
 *   when any attempt of a write may have reached Redis (written, then the
 *   connection was lost or no answer came), saying the write may or may not
 *   have been applied; otherwise `unreachable`, saying nothing was written
 *   (and, when the connection cannot be reopened because Redis refuses the
 *   credentials, saying so: redis-reconnect-cause.ts). A write that fewer
 *   replicas than `--redis-wait-replicas` acknowledged ends `outcome_unknown`
 *   stating the time the call waited in all.
 *   Final conditions (MISCONF, OOM, the durability guard) throw their own
 *   StoreFailure at once, or `outcome_unknown` when an earlier attempt may
 *   have been applied. Anything else (a Lua error) is rethrown as is and
 *   becomes INTERNAL.
 *
 * Not safe to share between RPCs: the id and the deadline are the RPC's.
 */
export class RedisOperation {
  private ownId: string | undefined;
  /** The operation id: 16 random hex characters, drawn on first use (a read never uses one). */
  get id(): string {
    return (this.ownId ??= randomHexId());
  }
  private readonly started = performance.now();
  /** True once an attempt of a write may have reached Redis. */
  private maybeApplied = false;

  /**
   * @param redis the shared command connection.
   * @param timeoutMs `--store-timeout`: milliseconds the whole operation may take.
   * @param writes true for the operation of a write RPC (its failures say whether anything was written).
   */
  constructor(
    private readonly redis: RedisClient,
    private readonly timeoutMs: number,
    private readonly writes: boolean,
    private readonly waits = true,
  ) {}

  /** The operation record to run a write script with, under `key` (a `RedisKeys.*Op` key built from {@link id}). */
  record(key: string): OpRecord {
    return { key, ttlMs: opRecordTtlMs(this.timeoutMs) };
  }

  /** Runs a request that changes nothing, with retries; see the class comment for what it throws. */
  read<T>(request: (redis: RedisClient) => Promise<T>): Promise<T> {
    return this.attempt(false, request);
  }

  /**
   * Runs `script`: a write script with its operation record `op`, or a
   * read-only or idempotent script without one. Bulk replies come back as
   * Buffers when `buffers` is true.
   */
  script(script: RedisScript, keys: string[], args: ScriptArg[], op?: OpRecord, buffers = false): Promise<unknown> {
    const wait = script.readOnly === true || !this.waits ? undefined : replicaWait(this.redis);
    // A write refused by Redis as a whole (OOM, MISCONF, READONLY) turns health NOT_SERVING (redis-write-refusal.ts).
    const refusable = script.readOnly === true ? undefined : (keys[0] ?? "");
    if (wait !== undefined) {
      // Writes go through the writer connection, so that a WAIT blocks no read;
      // a recorded write is acknowledged only once enough replicas hold it.
      if (op === undefined) return this.attempt(false, () => (buffers ? runScriptBuffer : runScript)(wait.writer, script, keys, args), refusable);
      return this.attempt(true, () => runScriptAndWait(wait.writer, script, buffers, keys, args, op, wait.replicas, this.waitMs()), refusable);
    }
    const run = buffers ? runScriptBuffer : runScript;
    // A recorded write waits for a place among the writes in flight (redis-write-window.ts).
    return this.attempt(op !== undefined, (redis) => run(redis, script, keys, args, op), refusable, op === undefined ? undefined : writeWindow(this.redis, keys[0]));
  }

  /** Milliseconds a WAIT of this operation may block: most of the time it has left, at least 1 (WAIT 0 would block forever). */
  private waitMs(): number {
    return Math.max(1, Math.floor(this.remainingMs() * 0.8));
  }

  /** Milliseconds left before the operation's deadline (`--store-timeout` from its start); 0 or less once it has passed. */
  remainingMs(): number {
    return this.timeoutMs - (performance.now() - this.started);
  }

  /** Least time a retry needs left to be sent: a quarter of the timeout, at most 250 ms. */
  private lastAttemptMs(): number {
    return Math.min(250, this.timeoutMs / 4);
  }

  /**
   * Runs `request` with retries (see the class comment). `write`: an attempt
   * may apply it (decides `outcome_unknown`); `refusable`: the key of a write
   * script, whose refusals are noted for health (redis-write-refusal.ts);
   * `window`: the connection's write window, in which each attempt first
   * takes a place (its wait counts in the operation's time), held until Redis
   * answers the command or the connection fails.
   *
   * The first attempt is sent before p-retry is involved: almost every call
   * needs no retry, and p-retry's setup for each call (its options, their
   * checks, its closures) cost 7–12 % of a small Redis call's server CPU
   * (bench/RESULTS.md). When that attempt fails, p-retry is handed its error
   * as the outcome of its own first attempt, so the attempts, their numbers,
   * the backoff and the verdict are what they would have been had p-retry run
   * from the start.
   */
  private async attempt<T>(write: boolean, request: (redis: RedisClient) => Promise<T>, refusable?: string, window?: RedisWriteWindow): Promise<T> {
    let cause = "no attempt made";
    // The last attempt's error; built only when no attempt has failed yet (an Error's stack costs a few µs per call).
    let last: unknown;
    const send = async (attemptNumber: number): Promise<T> => {
      const left = this.remainingMs();
      // Too little time left for a retry to be answered: end with the last attempt's
      // (definite) error rather than send a command that would be cut off unanswered.
      if (left <= 0 || (attemptNumber > 1 && left < this.lastAttemptMs())) throw new AbortError((last as Error | undefined) ?? new RedisAttemptTimeout("no time left"));
      if (window === undefined) return await withinMs(Promise.resolve().then(() => request(this.redis)), left);
      const admitted = window.enter(left);
      if (admitted !== undefined) await admitted;
      const rest = this.remainingMs();
      // A write that waited for its place is sent only with time enough to be answered, as a retry is.
      if (admitted !== undefined && rest < this.lastAttemptMs()) {
        window.leave();
        throw new RedisWindowTimeout("the write got its place in the window to Redis with too little time left and was not sent");
      }
      const sent = Promise.resolve().then(() => request(this.redis));
      // The place is given back when Redis answers (or the connection fails), not when this attempt stops waiting:
      // a command cut off unanswered is still at Redis, and the writes behind it wait rather than pile up there.
      sent.then(
        () => window.leave(),
        () => window.leave(),
      );
      return await withinMs(sent, rest);
    };
    let first: unknown;
    try {
      return await send(1);
    } catch (err) {
      first = err;
    }
    try {
      return await pRetry((attemptNumber) => (attemptNumber === 1 ? Promise.reject(first) : send(attemptNumber)), {
        retries: Infinity,
        minTimeout: 10,
        factor: 2,
        maxTimeout: 200,
        randomize: true,
        // The operation's deadline, counted from now (the first attempt has taken some of it).
        maxRetryTime: Math.max(0, this.remainingMs()),
        onFailedAttempt: ({ error }) => {
          last = error;
          if (refusable !== undefined) writeRefusals(this.redis)?.note(error, refusable);
          const c = classifyRedisError(error);
          if (c.kind !== "retry") return;
          const why = c.sent ? undefined : reconnectCause(this.redis);
          cause = why === undefined || c.cause !== "not connected" ? c.cause : `${c.cause}: ${why}`;
          if (write && c.sent) this.maybeApplied = true;
        },
        shouldRetry: ({ error }) => classifyRedisError(error).kind === "retry",
      });
    } catch (err) {
      throw this.verdict(err, cause);
    }
  }

  /** The error an operation ends with, from the last attempt's error. */
  private verdict(err: unknown, cause: string): unknown {
    const c = classifyRedisError(err);
    if (c.kind === "bug") return err;
    const late = `Redis did not answer within ${this.timeoutMs} ms (${cause})`;
    if (err instanceof ReplicaShortfall) {
      // The time the call waited in all, retries included: the last WAIT's own limit is only its share.
      const waited = Math.round(performance.now() - this.started);
      return new StoreFailure(
        "outcome_unknown",
        `the write was applied on the Redis primary, but only ${err.acknowledged} of ${err.wanted} replicas acknowledged it within ${waited} ms (--redis-wait-replicas ${err.wanted}): it could be lost with that primary (outcome unknown)`,
        { cause: err },
      );
    }
    if (this.maybeApplied) {
      // This attempt wrote nothing, but an earlier one may have: drop the "nothing was written" ending.
      const why = c.kind === "fail" ? c.failure.message.replace(/;? (?:and )?nothing was written$/, "").replace(/; the write was refused$/, "; this attempt was refused") : late;
      return new StoreFailure("outcome_unknown", `${why}; the write may or may not have been applied (outcome unknown)`, { cause: err });
    }
    if (c.kind === "fail") return c.failure;
    return new StoreFailure("unreachable", this.writes ? `${late}; nothing was written` : late, { cause: err });
  }
}

/**
 * Starts {@link RedisOperation}s on one connection with one timeout; each
 * Redis store holds one.
 */
export class RedisOperations {
  /**
   * @param redis the shared command connection.
   * @param timeoutMs `--store-timeout` in milliseconds.
   * @param waits false for writes that need not wait for replicas under
   *   `--redis-wait-replicas` (redis-replicas.ts): the store's configuration
   *   and derived data written at start, which a start after a failover
   *   writes again; true (the default) for every write of an RPC.
   */
  constructor(
    readonly redis: RedisClient,
    readonly timeoutMs: number,
    readonly waits = true,
  ) {}

  /** A new operation for a write RPC (fresh id, deadline `timeoutMs` from now). */
  begin(): RedisOperation {
    return new RedisOperation(this.redis, this.timeoutMs, true, this.waits);
  }

  /** Runs one request that changes nothing as its own bounded, retried operation. */
  read<T>(request: (redis: RedisClient) => Promise<T>): Promise<T> {
    return new RedisOperation(this.redis, this.timeoutMs, false).read(request);
  }

  /** Runs one read-only script as its own bounded, retried operation. */
  readScript(script: RedisScript, keys: string[], args: ScriptArg[], buffers = false): Promise<unknown> {
    return new RedisOperation(this.redis, this.timeoutMs, false).script(script, keys, args, undefined, buffers);
  }
}
