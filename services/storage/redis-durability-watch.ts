import { EventEmitter } from "node:events";
import type { Redis } from "ioredis";
import { StoreFailure } from "./store-failure.js";

/**
 * What is wrong with a Redis server's persistence settings for OK-means-durable
 * (docs/DESIGN.md principle 1), or undefined when `appendonly` is `yes` and
 * `appendfsync` is `always`. The sentence names each wrong setting, e.g.
 * `Redis is not durable: appendfsync is "everysec" (needs "always")`.
 */
export function durabilityProblem(appendonly: string | undefined, appendfsync: string | undefined): string | undefined {
  const wrong: string[] = [];
  if (appendonly !== "yes") wrong.push(`appendonly is ${JSON.stringify(appendonly ?? "unset")} (needs "yes")`);
  if (appendfsync !== "always") wrong.push(`appendfsync is ${JSON.stringify(appendfsync ?? "unset")} (needs "always")`);
  return wrong.length === 0 ? undefined : `Redis is not durable: ${wrong.join(", ")}`;
}

/**
 * Reads `appendonly` and `appendfsync` with one CONFIG GET each.
 *
 * @returns {@link durabilityProblem} of the settings read: undefined when durable.
 * @throws the Redis error when CONFIG GET fails (connection lost, NOPERM).
 */
export async function readDurability(redis: Redis): Promise<string | undefined> {
  const [appendonly, appendfsync] = await Promise.all([redis.config("GET", "appendonly"), redis.config("GET", "appendfsync")]);
  return durabilityProblem((appendonly as string[])[1], (appendfsync as string[])[1]);
}

/** A node's replication as `INFO replication` reports it. */
export interface ReplicationState {
  /** `master` or `slave` (`role:`). */
  role: string;
  /** Replicas connected (`connected_slaves`). */
  connected: number;
  /** Of those, the replicas in sync (`slaveN:...,state=online,...`): the ones a WAIT can count. */
  online: number;
}

/** Parses the text of `INFO replication` into a {@link ReplicationState}. */
export function parseReplication(info: string): ReplicationState {
  const role = /^role:(\w+)/m.exec(info)?.[1] ?? "unknown";
  const connected = Number(/^connected_slaves:(\d+)/m.exec(info)?.[1] ?? 0);
  const online = [...info.matchAll(/^slave\d+:.*\bstate=online\b/gm)].length;
  return { role, connected, online };
}

/**
 * Why a primary cannot take writes under `--redis-wait-replicas wanted`, or
 * undefined: fewer than `wanted` replicas in sync (a replica never takes
 * writes, so no count applies to it). E.g. `Redis primary 127.0.0.1:6379 has
 * 0 of 1 replicas connected (and in sync), fewer than --redis-wait-replicas
 * 1: a write could not be acknowledged`.
 */
export function replicaProblem(state: ReplicationState, wanted: number, node: string): string | undefined {
  if (state.role !== "master" || state.online >= wanted) return undefined;
  const syncing = state.connected > state.online ? `, ${state.connected - state.online} more still syncing` : "";
  return `Redis primary ${node} has ${state.online} of ${wanted} replicas connected (and in sync${syncing}), fewer than --redis-wait-replicas ${wanted}: a write could not be acknowledged`;
}

/** Milliseconds between two periodic checks of a watched connection. */
export const DURABILITY_CHECK_MS = 5000;

/**
 * Milliseconds one durability check may take: half of `--store-timeout`
 * (`storeTimeoutMs`), at least 1. Half, so that a Redis that stops answering
 * is reported as "the durability check did not answer" (and writes are
 * refused) before calls waiting on the same server reach their own limit.
 */
export function durabilityCheckTimeoutMs(storeTimeoutMs: number): number {
  return Math.max(1, Math.floor(storeTimeoutMs / 2));
}

/**
 * How one durability check ended, as {@link DurabilityWatch} reports it with
 * its `checked` event: `passed` (answered, nothing wrong), `problem`
 * (answered, a problem found), `failed` (did not answer within its time
 * limit, or its reads failed), `not_connected` (its time came while the
 * watched connection was down: nothing was sent, and writes stay refused
 * until a check after the reconnect passes).
 */
export type DurabilityCheckOutcome = "passed" | "problem" | "failed" | "not_connected";

/** Options for {@link DurabilityWatch}. */
export interface DurabilityWatchOptions {
  /** Milliseconds between two periodic checks (default {@link DURABILITY_CHECK_MS}). */
  intervalMs?: number;
  /**
   * Milliseconds one check may take before it counts as failed: the server is
   * then treated as not durable (default 2500; `connectRedis` passes
   * {@link durabilityCheckTimeoutMs}).
   */
  timeoutMs?: number;
  /** Check `appendonly` and `appendfsync` (strict mode; default true). */
  durability?: boolean;
  /**
   * `--redis-wait-replicas`: a primary must have this many replicas in sync
   * (`INFO replication`), or writes are refused (default 0: not checked).
   */
  replicas?: number;
}

/**
 * Keeps checking that a Redis server can take writes as the server promises
 * them (docs/DESIGN.md principle 1, issues 9 and 13): in strict mode that it
 * stays durable (`appendonly yes`, `appendfsync always`), and with
 * `--redis-wait-replicas N` that, while it is a primary, at least N replicas
 * are connected and in sync (so a write can be acknowledged at all). It
 * checks after every reconnect of the watched connection, since the server
 * may have been restarted with another configuration (say without
 * `appendonly`, and so without its data), and every `intervalMs` (a
 * `CONFIG SET`, a replica lost). Emits `change` whenever {@link problem} or
 * {@link verified} changes, and `close` when the connection is lost.
 *
 * Checks run on a connection of their own to the same node (opened on the
 * first check, opened again when it ends; it sends nothing but checks),
 * never on the watched one: a
 * check queued behind a `WAIT` that blocks (replicas slow or gone), or
 * behind a long write, would not answer in time, and the server would be
 * reported not durable while it is.
 *
 * It fails closed. Every check has a time limit (`timeoutMs`), and a check
 * that does not answer in time counts as a problem. Checks never wait for
 * each other: a check that hangs is abandoned at its time limit, the next one
 * starts on schedule, and the result of the most recently started check that
 * has answered is the one in force (a late answer from an older check is
 * ignored). From a lost connection until a check started after the
 * connection came back passes, the server is not {@link verified}, and
 * {@link admit} keeps writes from reaching a restarted server before its
 * configuration was read.
 *
 * Emits `checked` with a {@link DurabilityCheckOutcome} as each check ends
 * (the server counts them: `mecatl_drivers_redis_durability_checks_total`).
 */
export class DurabilityWatch extends EventEmitter {
  /** Why the server cannot take writes (not durable, not known to be, too few replicas), from the last check that answered; undefined when it passed. */
  problem: string | undefined;
  /** False from a lost connection until a check started on the new connection passes. */
  verified = true;
  /** The node's role (`master`, `slave`) as the last replica check read it; undefined when not read yet (or not checked). */
  role: string | undefined;
  private readonly timer: NodeJS.Timeout;
  private readonly timeoutMs: number;
  private readonly durability: boolean;
  private readonly replicas: number;
  /** The connection checks run on, or undefined until the first check (and after {@link redis} ended). */
  private checker: Redis | undefined;
  private ended = false;
  /** True when a check could not be sent on the check connection: it checks again once that is back. */
  private checkerLost = false;
  /** Sequence number of the last check started. */
  private started = 0;
  /** Sequence number of the check whose result {@link problem} holds. */
  private applied = 0;
  /** Counts lost connections; a check only verifies the connection it started on. */
  private connection = 0;
  /** The check started by the timer and not yet settled, if any. */
  private periodic: Promise<void> | undefined;

  constructor(
    private readonly redis: Redis,
    options: DurabilityWatchOptions = {},
  ) {
    super();
    this.timeoutMs = options.timeoutMs ?? 2500;
    this.durability = options.durability ?? true;
    this.replicas = options.replicas ?? 0;
    redis.on("ready", () => void this.check());
    // Writes waiting in admit() listen too, any number of them.
    this.setMaxListeners(0);
    redis.on("close", () => {
      this.connection++;
      this.update(this.problem, false);
      this.emit("close");
    });
    redis.once("end", () => {
      this.ended = true;
      clearInterval(this.timer);
      this.checker?.disconnect();
    });
    // One periodic check at a time; each is bounded by timeoutMs, so this never stalls for long.
    this.timer = setInterval(() => this.recheck(), options.intervalMs ?? DURABILITY_CHECK_MS);
    this.timer.unref();
  }

  /** `host:port` of the watched node. */
  get node(): string {
    return `${this.redis.options.host}:${this.redis.options.port}`;
  }

  /** What a check reads, for its messages. */
  private get reads(): string {
    const parts = [this.durability ? "CONFIG GET appendonly, appendfsync" : undefined, this.replicas > 0 ? "INFO replication" : undefined];
    return parts.filter((p) => p !== undefined).join("; ");
  }

  /**
   * The connection checks run on: a duplicate of the watched one (same node,
   * credentials, TLS, database) that, unlike it, may queue a check while it
   * connects (the check's time limit bounds the wait).
   */
  private checkConnection(): Redis {
    if (this.checker === undefined || this.checker.status === "end") {
      // Nothing before the check on a new connection (no ready check, no CLIENT SETNAME or
      // SETINFO): each would cost a round trip out of the check's time limit.
      const checker = this.redis.duplicate({ lazyConnect: false, enableOfflineQueue: true, enableAutoPipelining: false, enableReadyCheck: false, disableClientInfo: true, connectionName: undefined });
      checker.on("error", () => undefined);
      checker.on("ready", () => {
        if (!this.checkerLost) return;
        this.checkerLost = false;
        void this.check();
      });
      this.checker = checker;
    }
    return this.checker;
  }

  /**
   * Why a write must be refused now, or undefined when it need not be: the
   * last check found a problem or did not answer (`not_durable`), or the
   * connection is down and ioredis would hold the write in its offline
   * queue, to send it on reconnect before any check can run (`unreachable`;
   * without an offline queue ioredis refuses such a write itself). A write
   * while the server is not yet checked again after a reconnect waits for
   * that check instead ({@link admit}). Nothing has been sent when it
   * refuses.
   */
  refusal(): StoreFailure | undefined {
    const refused = "the write was refused and nothing was written";
    if (this.redis.status !== "ready") {
      return this.redis.options.enableOfflineQueue ? new StoreFailure("unreachable", `Redis is unreachable (connection lost, reconnecting); ${refused}`) : undefined;
    }
    if (this.problem !== undefined) return new StoreFailure("not_durable", `${this.problem}; ${refused}`);
    return undefined;
  }

  /**
   * Decides whether a write may be sent now (the write guard of every write
   * script, redis-script.ts): throws {@link refusal} when there is one;
   * returns undefined when the write may go at once; and while the
   * connection is ready but not yet checked since it reconnected, returns a
   * promise that resolves once that check passes, or rejects with the
   * refusal it leads to (a problem, a check that did not answer, the
   * connection lost again). It settles within the check's time limit.
   */
  admit(): void | Promise<void> {
    const refusal = this.refusal();
    if (refusal !== undefined) throw refusal;
    if (this.redis.status !== "ready" || this.verified) return undefined;
    return new Promise<void>((resolve, reject) => {
      const settle = () => {
        const pending = this.redis.status === "ready" && !this.verified && this.problem === undefined;
        if (pending && !late) return;
        this.off("change", settle);
        this.off("close", settle);
        clearTimeout(timer);
        const r = pending ? this.pendingRefusal() : this.refusal();
        if (r === undefined) resolve();
        else reject(r);
      };
      let late = false;
      const timer = setTimeout(() => {
        late = true;
        settle();
      }, this.timeoutMs);
      timer.unref();
      this.on("change", settle);
      this.on("close", settle);
    });
  }

  /** The refusal for a write while the server has not been checked since it reconnected. */
  private pendingRefusal(): StoreFailure {
    return new StoreFailure("not_durable", "Redis reconnected and its durability is not yet verified again; the write was refused and nothing was written");
  }

  /** One check's reads on `checker`: the first problem found, or undefined. */
  private async read(checker: Redis): Promise<string | undefined> {
    const [durability, replication] = await Promise.all([
      this.durability ? readDurability(checker) : undefined,
      this.replicas > 0 ? checker.info("replication").then(parseReplication) : undefined,
    ]);
    if (replication !== undefined) this.role = replication.role;
    return durability ?? (replication === undefined ? undefined : replicaProblem(replication, this.replicas, this.node));
  }

  /**
   * Starts a check now unless one started by the timer or by an earlier
   * call is still running (a burst of writes that fell short of replicas
   * starts one check, not one each).
   */
  recheck(): void {
    this.periodic ??= this.check().finally(() => (this.periodic = undefined));
  }

  /**
   * Starts a check now, independent of any check in progress. Resolves (never
   * rejects) when it has answered or reached its time limit; sends nothing
   * while the watched connection is not ready (outcome `not_connected`).
   */
  check(): Promise<void> {
    if (this.ended) return Promise.resolve();
    if (this.redis.status !== "ready") {
      this.emit("checked", "not_connected" satisfies DurabilityCheckOutcome);
      return Promise.resolve();
    }
    const seq = ++this.started;
    const connection = this.connection;
    const checker = this.checkConnection();
    return new Promise<void>((resolve) => {
      let failure = `did not answer within ${this.timeoutMs} ms`;
      const timer = setTimeout(() => {
        this.apply(seq, connection, `Redis is not known to be durable: the durability check (${this.reads}) ${failure}`);
        this.emit("checked", "failed" satisfies DurabilityCheckOutcome);
        resolve();
      }, this.timeoutMs);
      timer.unref();
      this.read(checker).then(
        (problem) => {
          clearTimeout(timer);
          this.apply(seq, connection, problem);
          this.emit("checked", (problem === undefined ? "passed" : "problem") satisfies DurabilityCheckOutcome);
          resolve();
        },
        (err: Error) => {
          if (checker.status !== "ready") {
            // The check's own connection broke or is reopening: a check started once it is
            // back may still answer in time; this one counts only at its time limit.
            failure = `could not be sent (${err.message})`;
            this.checkerLost = true;
            return;
          }
          clearTimeout(timer);
          this.apply(seq, connection, `Redis is not known to be durable: the durability check failed (${this.reads}: ${err.message})`);
          this.emit("checked", "failed" satisfies DurabilityCheckOutcome);
          resolve();
        },
      );
    });
  }

  /** Puts the result of check `seq` in force unless a later-started check has already answered. */
  private apply(seq: number, connection: number, problem: string | undefined): void {
    if (seq <= this.applied) return;
    // The watched connection was lost since the check started: its reconnect checks again.
    if (this.redis.status !== "ready" && connection !== this.connection) return;
    this.applied = seq;
    this.update(problem, this.verified || (problem === undefined && connection === this.connection));
  }

  private update(problem: string | undefined, verified: boolean): void {
    if (problem === this.problem && verified === this.verified) return;
    this.problem = problem;
    this.verified = verified;
    this.emit("change");
  }
}
