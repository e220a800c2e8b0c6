import type { Redis } from "ioredis";

/**
 * A Lua script run atomically on the Redis server with EVALSHA (ioredis loads
 * it on first use). Each script documents its KEYS and ARGV at the top of its
 * source (DESIGN.md principle 4).
 */
export interface RedisScript {
  /** Command name registered on the client, unique per script. */
  readonly name: string;
  readonly lua: string;
}

type ScriptRunner = (numberOfKeys: number, ...keysAndArgs: Array<string | Buffer | Uint8Array | number>) => Promise<unknown>;

function runner(redis: Redis, script: RedisScript, buffers: boolean): ScriptRunner {
  const r = redis as unknown as Record<string, ScriptRunner>;
  if (typeof r[script.name] !== "function") redis.defineCommand(script.name, { lua: script.lua });
  const name = buffers ? `${script.name}Buffer` : script.name;
  return r[name]!.bind(redis);
}

/**
 * Runs `script` with the given KEYS and ARGV; string replies come back as
 * JavaScript strings.
 *
 * @throws the Redis error (e.g. connection lost), which services map to INTERNAL.
 */
export function runScript(redis: Redis, script: RedisScript, keys: string[], args: Array<string | Buffer | Uint8Array | number>): Promise<unknown> {
  return runner(redis, script, false)(keys.length, ...keys, ...args);
}

/** Like {@link runScript}, but bulk-string replies come back as Buffers (for payloads). */
export function runScriptBuffer(redis: Redis, script: RedisScript, keys: string[], args: Array<string | Buffer | Uint8Array | number>): Promise<unknown> {
  return runner(redis, script, true)(keys.length, ...keys, ...args);
}
