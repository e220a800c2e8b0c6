import { createHash } from "node:crypto";
import { isCluster, type RedisClient } from "./redis-client.js";
import { keySlot } from "./redis-layout.js";

/**
 * A Lua script run atomically on the Redis server with EVALSHA, and EVAL
 * when Redis does not hold it yet (see {@link evalScript}). Each script
 * documents its KEYS and ARGV at the top of its source (docs/DESIGN.md
 * principle 4). Declare scripts with {@link redisScript}.
 *
 * Every script not marked `readOnly` is a write and runs under the operation
 * record convention ({@link OP_RECORD_LUA}): it is called with one more KEY
 * and one more ARGV than its own contract says, which the shared prologue
 * removes before the script's own code runs; but for a write marked
 * `idempotent`, which is safe to repeat as it is and takes no record.
 */
export interface RedisScript {
  /** The script's name, unique per script: it begins the error replies the script raises, and names it in errors of this module. */
  readonly name: string;
  /** The script's own code; write scripts get {@link OP_RECORD_LUA} in front of it. */
  readonly lua: string;
  /** True for a script that never writes; it runs even while writes are refused (see {@link guardRedisWrites}) and takes no operation record. */
  readonly readOnly?: boolean;
  /**
   * True for a write whose repetition changes nothing more (a retry after a
   * lost reply is harmless by construction, e.g. a chunk stored at a fixed
   * index): refused like every write while Redis is not known to be durable,
   * but run without an operation record.
   */
  readonly idempotent?: boolean;
}

/** Whether `script` runs with an operation record: every write that is not {@link RedisScript.idempotent}. */
function recorded(script: RedisScript): boolean {
  return script.readOnly !== true && script.idempotent !== true;
}

/**
 * Operation records (issue 9, docs/DESIGN.md principle 2): how a write stays
 * exactly-once when its reply is lost and the caller retries.
 *
 * The server picks a fresh random operation id for each RPC and reuses it
 * for every retry of that RPC (retries after a lost connection, every round
 * of the schedule store's compare-and-set loop). Each write script is called
 * with the operation's record key appended to KEYS and the record's TTL in
 * milliseconds appended to ARGV; the record key carries the hash tag of the
 * keys the script writes (`RedisKeys.sessionOp`, `RedisKeys.scheduleOp`), so
 * the script stays on one Redis Cluster slot. This prologue, put in front of
 * every write script:
 *
 * - pops the record key into `OP_KEY` and the TTL into `OP_TTL`, so `KEYS`
 *   and `ARGV` are exactly as the script documents them at its top;
 * - if the record exists, returns the reply recorded there and runs nothing
 *   else: the operation was already applied, by an attempt whose reply was
 *   lost;
 * - defines `op_done(reply)`, which the script calls on every path that
 *   writes, as `return op_done(reply)`: it stores `cmsgpack.pack(reply)`
 *   under the record key with `SET ... PX OP_TTL`, in the same atomic script
 *   as the write, and returns the reply. A path that writes nothing (a
 *   refusal, a compare-and-set guard that failed) returns its reply without
 *   recording, so a retry judges afresh; as nothing was applied, that is
 *   still the truth.
 *
 * Replies are tables of strings and integers, or one string or integer
 * (what `cmsgpack` carries without loss).
 */
export const OP_RECORD_LUA = `local OP_KEY = table.remove(KEYS)
local OP_TTL = table.remove(ARGV)
local OP_RECORDED = redis.call('GET', OP_KEY)
if OP_RECORDED then return cmsgpack.unpack(OP_RECORDED) end
local function op_done(reply)
  redis.call('SET', OP_KEY, cmsgpack.pack(reply), 'PX', OP_TTL)
  return reply
end
`;

/** Shortest lifetime of an operation record: one minute (see {@link opRecordTtlMs}). */
export const OP_RECORD_MIN_TTL_MS = 60_000;

/**
 * How long an operation record lives, in milliseconds: ten times
 * `--store-timeout`, and at least {@link OP_RECORD_MIN_TTL_MS}. Every retry
 * of one operation happens within `--store-timeout` of its first attempt
 * (storage/redis-operation.ts), so the record outlives every retry that can
 * need it many times over, and then expires: at 5,000 writes/s and the
 * default 5 s timeout, about 300,000 small keys are alive at a time.
 */
export function opRecordTtlMs(storeTimeoutMs: number): number {
  return Math.max(OP_RECORD_MIN_TTL_MS, 10 * storeTimeoutMs);
}

/** The operation record a write script is run with: its key (hash-tagged like the keys written) and TTL in milliseconds. */
export interface OpRecord {
  readonly key: string;
  readonly ttlMs: number;
}

/**
 * Per connection: a check run before every script that writes. It throws to
 * refuse the write, or returns a promise the write waits for (rejecting
 * refuses it).
 */
const writeGuards = new WeakMap<RedisClient, (key: string | undefined) => void | Promise<void>>();

/**
 * Installs `check` on `redis`: every script not marked `readOnly` runs it
 * first and fails with whatever it throws, or waits for the promise it
 * returns and fails if that rejects, before anything is sent. Used to refuse
 * writes while the server is not known to be durable, and to hold them while
 * it is checked again after a reconnect (redis-connection.ts).
 */
export function guardRedisWrites(redis: RedisClient, check: (key: string | undefined) => void | Promise<void>): void {
  writeGuards.set(redis, check);
}

const shortfallHooks = new WeakMap<RedisClient, () => void>();

/**
 * Installs `hook` on `redis`: called whenever fewer replicas than asked
 * acknowledged a write of {@link runScriptAndWait} (a {@link ReplicaShortfall}),
 * so that the replica check runs at once instead of at its next period and
 * the writes after it are refused before they are sent (redis-connection.ts,
 * redis-cluster.ts).
 */
export function onReplicaShortfall(redis: RedisClient, hook: () => void): void {
  shortfallHooks.set(redis, hook);
}

/**
 * Declares a script (at module load, as a top-level constant, so every
 * script is a constant with its KEYS/ARGV contract at its top) and makes
 * its source and SHA-1 once.
 */
export function redisScript(script: RedisScript): RedisScript {
  sourceOf(script);
  return script;
}

type ScriptArg = string | Buffer | Uint8Array | number;

/** The source sent for a script (with {@link OP_RECORD_LUA} in front of a recorded write) and its SHA-1 (hex), made once per script. */
const sources = new WeakMap<RedisScript, { lua: string; sha: string }>();

function sourceOf(script: RedisScript): { lua: string; sha: string } {
  let source = sources.get(script);
  if (source === undefined) {
    const lua = recorded(script) ? OP_RECORD_LUA + script.lua : script.lua;
    sources.set(script, (source = { lua, sha: createHash("sha1").update(lua).digest("hex") }));
  }
  return source;
}

/** True for Redis's answer to EVALSHA of a script it does not hold: nothing ran. */
function isNoScript(err: unknown): boolean {
  return err instanceof Error && err.message.startsWith("NOSCRIPT");
}

/**
 * The ioredis command that sends `script` and that command's first argument:
 * EVALSHA and the script's SHA-1, or, `withSource`, EVAL and its source;
 * `buffers`: the variant whose bulk-string replies are Buffers.
 */
function scriptCommand(script: RedisScript, buffers: boolean, withSource: boolean): [command: string, first: string] {
  const { lua, sha } = sourceOf(script);
  return [`${withSource ? "eval" : "evalsha"}${buffers ? "Buffer" : ""}`, withSource ? lua : sha];
}

type CommandSender = (...args: ScriptArg[]) => Promise<unknown>;

/**
 * Runs `script` with `argv` (key count, KEYS, ARGV): EVALSHA by its SHA-1,
 * then, when Redis answers NOSCRIPT (it restarted, its script cache was
 * flushed, or a replica was promoted), EVAL with the whole source, which
 * Redis runs and caches. NOSCRIPT means nothing ran, so the second send
 * never applies a write twice. `buffers`: bulk-string replies as Buffers.
 *
 * Scripts go as the built-in commands rather than as ioredis custom
 * commands (`defineCommand`): ioredis copies every custom command onto each
 * auto-pipelined batch it creates, about 20 µs per batch for this project's
 * scripts (per call at one call in flight), and a custom command defined
 * while a batch was pending was missing from it, which broke the batch.
 */
function evalScript(redis: RedisClient, script: RedisScript, buffers: boolean, argv: ScriptArg[]): Promise<unknown> {
  const send = (withSource: boolean) => {
    const [command, first] = scriptCommand(script, buffers, withSource);
    return (redis as unknown as Record<string, CommandSender>)[command]!.call(redis, first, ...argv);
  };
  return send(false).catch((err: unknown) => {
    if (!isNoScript(err)) throw err;
    return send(true);
  });
}

/** The arguments of a script command: key count, KEYS, ARGV, with the operation record's key and TTL when given. */
function scriptArgs(script: RedisScript, keys: string[], args: ScriptArg[], op: OpRecord | undefined): [number, ...ScriptArg[]] {
  if (recorded(script) !== (op !== undefined)) {
    throw new Error(`${script.name}: ${op === undefined ? "a write script needs an operation record" : "a read-only or idempotent script takes no operation record"}`);
  }
  return op === undefined ? [keys.length, ...keys, ...args] : [keys.length + 1, ...keys, op.key, ...args, op.ttlMs];
}

function call(redis: RedisClient, script: RedisScript, buffers: boolean, keys: string[], args: ScriptArg[], op: OpRecord | undefined): Promise<unknown> {
  const argv = scriptArgs(script, keys, args, op);
  const admitted = script.readOnly === true ? undefined : writeGuards.get(redis)?.(keys[0]);
  return admitted === undefined ? evalScript(redis, script, buffers, argv) : admitted.then(() => evalScript(redis, script, buffers, argv));
}

/**
 * Thrown when fewer replicas than `--redis-wait-replicas` acknowledged a
 * write within the time given to WAIT: the write is applied on the primary
 * (and recorded), but could be lost with it.
 */
export class ReplicaShortfall extends Error {
  override name = "ReplicaShortfall";

  /**
   * @param acknowledged replicas that acknowledged (WAIT's answer).
   * @param wanted `--redis-wait-replicas`.
   * @param waitedMs the WAIT timeout in milliseconds (this attempt's; the
   *   operation's message states the time the call waited in all, redis-operation.ts).
   */
  constructor(
    readonly acknowledged: number,
    readonly wanted: number,
    readonly waitedMs: number,
  ) {
    super(`only ${acknowledged} of ${wanted} replicas acknowledged the write within ${waitedMs} ms`);
  }
}

/** A write waiting to be sent in the next pipeline of its group (see {@link runScriptAndWait}). */
interface WaitingWrite {
  script: RedisScript;
  buffers: boolean;
  /** Key count, KEYS, ARGV. */
  argv: ScriptArg[];
  /** True once Redis answered NOSCRIPT to its EVALSHA: sent again with EVAL and the whole source. */
  withSource: boolean;
  replicas: number;
  waitMs: number;
  resolve(reply: unknown): void;
  reject(err: unknown): void;
}

/** Per client and node group: the writes waiting for the next pipeline, and whether one is in flight. */
interface WaitGroup {
  queued: WaitingWrite[];
  inFlight: boolean;
}

const waitGroups = new WeakMap<RedisClient, Map<string, WaitGroup>>();

/**
 * The node group of a command on `key`: on a cluster, the nodes serving its
 * slot, as one string (one pipeline goes to one node; a write window is kept
 * per node, redis-write-window.ts); `""` on a single Redis or without a key.
 */
export function nodeGroupOf(redis: RedisClient, key: string | undefined): string {
  if (!isCluster(redis) || key === undefined) return "";
  return redis.slots[keySlot(key)]?.join(",") ?? "";
}

/**
 * Sends the queued writes of one group as one pipeline ending with a single
 * `WAIT`, which counts every write before it on the connection; settles each
 * write by its own reply and the WAIT's answer; then sends what queued up
 * meanwhile, if anything.
 */
function sendWaitGroup(redis: RedisClient, groups: Map<string, WaitGroup>, name: string): void {
  const group = groups.get(name)!;
  const writes = group.queued;
  group.queued = [];
  group.inFlight = true;
  const replicas = Math.max(...writes.map((w) => w.replicas));
  const waitMs = Math.max(1, Math.min(...writes.map((w) => w.waitMs)));
  const pipeline = redis.pipeline() as unknown as Record<string, (...a: unknown[]) => unknown> & ReturnType<RedisClient["pipeline"]>;
  for (const w of writes) {
    const [command, first] = scriptCommand(w.script, w.buffers, w.withSource);
    pipeline[command]!(first, ...w.argv);
  }
  pipeline.wait(replicas, waitMs);
  const settle = (results: Array<[Error | null, unknown]> | null, failure?: unknown) => {
    const [waitError, acknowledged] = results?.at(-1) ?? [failure ?? new Error("no answer to the pipeline"), 0];
    if (!waitError && writes.some((w) => (acknowledged as number) < w.replicas)) shortfallHooks.get(redis)?.();
    writes.forEach((w, i) => {
      const [error, reply] = results?.[i] ?? [failure, undefined];
      // Nothing of it ran: it goes again, with its source, in the next pipeline.
      if (isNoScript(error) && !w.withSource) group.queued.push({ ...w, withSource: true });
      else if (error) w.reject(error);
      else if (waitError) w.reject(waitError);
      else if ((acknowledged as number) < w.replicas) w.reject(new ReplicaShortfall(acknowledged as number, w.replicas, waitMs));
      else w.resolve(reply);
    });
    group.inFlight = false;
    if (group.queued.length > 0) sendWaitGroup(redis, groups, name);
    else groups.delete(name);
  };
  pipeline.exec().then(
    (results) => settle(results as Array<[Error | null, unknown]> | null),
    (err: unknown) => settle(null, err),
  );
}

/**
 * Runs a write `script` like {@link runScript}, followed on the same
 * connection by `WAIT replicas waitMs`: the answer is the script's once
 * `replicas` replicas hold the write (`--redis-wait-replicas`, issue 13,
 * deliverable 3). WAIT blocks its connection until the replicas answer, so
 * writes are grouped as a group commit is: the writes that arrive while a
 * pipeline of their node is in flight go together in the next one, ending
 * with one WAIT that counts them all (on a cluster, one group per node; the
 * pipeline goes to the node of its writes' slots, so WAIT counts them
 * whichever primary takes them).
 *
 * @throws ReplicaShortfall when fewer replicas acknowledged in time; the
 *   errors of {@link runScript} otherwise.
 */
export async function runScriptAndWait(redis: RedisClient, script: RedisScript, buffers: boolean, keys: string[], args: ScriptArg[], op: OpRecord | undefined, replicas: number, waitMs: number): Promise<unknown> {
  const argv = scriptArgs(script, keys, args, op);
  const admitted = writeGuards.get(redis)?.(keys[0]);
  if (admitted !== undefined) await admitted;
  let groups = waitGroups.get(redis);
  if (groups === undefined) waitGroups.set(redis, (groups = new Map()));
  const name = nodeGroupOf(redis, keys[0]);
  let group = groups.get(name);
  if (group === undefined) groups.set(name, (group = { queued: [], inFlight: false }));
  const reply = new Promise<unknown>((resolve, reject) => group.queued.push({ script, buffers, argv, withSource: false, replicas, waitMs, resolve, reject }));
  if (!group.inFlight && group.queued.length === 1) {
    // The first write of an idle group waits one turn for others of the same turn.
    setImmediate(() => {
      if (!group.inFlight && group.queued.length > 0) sendWaitGroup(redis, groups, name);
    });
  }
  return reply;
}

/**
 * Runs `script` once with the given KEYS and ARGV (its own contract) and,
 * for a write script, its operation record (see {@link OP_RECORD_LUA});
 * string replies come back as JavaScript strings. Stores call it through
 * `RedisOperation` (redis-operation.ts), which bounds and retries it.
 *
 * @throws Error when `op` is missing for a write script or given for a
 *   read-only or idempotent one (a programming error); the write guard's
 *   {@link StoreFailure} (`not_durable`); or the Redis error (connection
 *   lost, error reply), which redis-operation.ts classifies.
 */
export function runScript(redis: RedisClient, script: RedisScript, keys: string[], args: ScriptArg[], op?: OpRecord): Promise<unknown> {
  return call(redis, script, false, keys, args, op);
}

/** Like {@link runScript}, but bulk-string replies come back as Buffers (for payloads). */
export function runScriptBuffer(redis: RedisClient, script: RedisScript, keys: string[], args: ScriptArg[], op?: OpRecord): Promise<unknown> {
  return call(redis, script, true, keys, args, op);
}
