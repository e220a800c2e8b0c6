import type { Redis } from "ioredis";

/**
 * A Lua script run atomically on the Redis server with EVALSHA (ioredis loads
 * it on first use). Each script documents its KEYS and ARGV at the top of its
 * source (DESIGN.md principle 4). Declare scripts with {@link redisScript} so
 * that {@link defineRedisScripts} can put every one of them on a connection
 * before it carries traffic.
 */
export interface RedisScript {
  /** Command name registered on the client, unique per script. */
  readonly name: string;
  readonly lua: string;
  /** True for a script that never writes; it runs even while writes are refused (see {@link guardRedisWrites}). */
  readonly readOnly?: boolean;
}

/**
 * Per connection: a check run before every script that writes. It throws to
 * refuse the write, or returns a promise the write waits for (rejecting
 * refuses it).
 */
const writeGuards = new WeakMap<Redis, () => void | Promise<void>>();

/**
 * Installs `check` on `redis`: every script not marked `readOnly` runs it
 * first and fails with whatever it throws, or waits for the promise it
 * returns and fails if that rejects, before anything is sent. Used to refuse
 * writes while the server is not known to be durable, and to hold them while
 * it is checked again after a reconnect (redis-connection.ts).
 */
export function guardRedisWrites(redis: Redis, check: () => void | Promise<void>): void {
  writeGuards.set(redis, check);
}

/** Every script declared with {@link redisScript}, in declaration order. */
const declared: RedisScript[] = [];

/**
 * Declares a script (at module load, as a top-level constant) and records it
 * for {@link defineRedisScripts}.
 */
export function redisScript(script: RedisScript): RedisScript {
  declared.push(script);
  return script;
}

type ScriptRunner = (numberOfKeys: number, ...keysAndArgs: Array<string | Buffer | Uint8Array | number>) => Promise<unknown>;

function define(redis: Redis, script: RedisScript): void {
  const r = redis as unknown as Record<string, ScriptRunner>;
  if (typeof r[script.name] !== "function") redis.defineCommand(script.name, { lua: script.lua });
}

/**
 * Defines every declared script on `redis`. Call it before the connection
 * carries any command: with auto-pipelining, ioredis copies the custom
 * commands into a pending pipeline when it creates it, so a script defined
 * for the first time while a pipeline is pending (another command sent in
 * the same turn, or queued behind a running pipeline) is missing from that
 * pipeline. The call then fails with "pipeline[functionName] is not a
 * function" and the pipeline's replies no longer line up with its callbacks,
 * which throws a TypeError inside ioredis and ends the process.
 */
export function defineRedisScripts(redis: Redis): void {
  for (const script of declared) define(redis, script);
}

function runner(redis: Redis, script: RedisScript, buffers: boolean): ScriptRunner {
  const admitted = script.readOnly === true ? undefined : writeGuards.get(redis)?.();
  // Scripts not declared with redisScript (tests) are defined here, on first use.
  define(redis, script);
  const r = redis as unknown as Record<string, ScriptRunner>;
  const name = buffers ? `${script.name}Buffer` : script.name;
  const run = r[name]!.bind(redis);
  return admitted === undefined ? run : (...keysAndArgs) => admitted.then(() => run(...keysAndArgs));
}

/**
 * Runs `script` with the given KEYS and ARGV; string replies come back as
 * JavaScript strings.
 *
 * @throws the Redis error (e.g. connection lost), or the write guard's error
 *   (`StoreFailure("not_durable")`, UNAVAILABLE) before anything is sent.
 */
export function runScript(redis: Redis, script: RedisScript, keys: string[], args: Array<string | Buffer | Uint8Array | number>): Promise<unknown> {
  return runner(redis, script, false)(keys.length, ...keys, ...args);
}

/** Like {@link runScript}, but bulk-string replies come back as Buffers (for payloads). */
export function runScriptBuffer(redis: Redis, script: RedisScript, keys: string[], args: Array<string | Buffer | Uint8Array | number>): Promise<unknown> {
  return runner(redis, script, true)(keys.length, ...keys, ...args);
}
