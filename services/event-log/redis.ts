import { publishCommand, type RedisClient } from "../storage/redis-client.js";
import type { RedisKeys } from "../storage/redis-keys.js";
import { RedisOperations } from "../storage/redis-operation.js";
import { randomHexId } from "../storage/random-id.js";
import { redisScript } from "../storage/redis-script.js";
import { RedisChangeFeed } from "./redis-feed.js";
import { PAGE_BYTES, type Appended, type EventLogStore, type LogPage, type NewRecord, type StoredRecord } from "./store.js";

/**
 * Appends one record, minting the generation if the log has none, and
 * announces the new length. Entry ids are `0-<position>`, so the stream is
 * ordered by position and a position resolves without a search.
 * KEYS[1] log header hash (`gen`, `n`), KEYS[2] log stream.
 * ARGV[1] generation to mint when the header has none, ARGV[2] change channel,
 * ARGV[3] kind (`e` event, `g` gap), ARGV[4] format (event) or reason (gap),
 * ARGV[5] payload (event) or empty (gap), ARGV[6] the command that announces:
 * `PUBLISH` (single Redis) or `SPUBLISH` (Redis Cluster: sharded, the
 * channel is on the log's slot; see `publishCommand`).
 * A write script: also takes the operation record (redis-script.ts
 * `OP_RECORD_LUA`), so a retried append returns the first one's answer.
 * Returns {generation, position} (recorded).
 */
export const APPEND_SCRIPT = redisScript({
  name: "mecatlEventsAppend",
  lua: `
local gen = redis.call('HGET', KEYS[1], 'gen')
if not gen then
  gen = ARGV[1]
  redis.call('HSET', KEYS[1], 'gen', gen)
end
local n = redis.call('HINCRBY', KEYS[1], 'n', 1)
local id = '0-' .. string.format('%d', n)
if ARGV[3] == 'e' then
  redis.call('XADD', KEYS[2], id, 'k', 'e', 'f', ARGV[4], 'p', ARGV[5])
else
  redis.call('XADD', KEYS[2], id, 'k', 'g', 'r', ARGV[4])
end
redis.call(ARGV[6], ARGV[2], gen .. ':' .. string.format('%d', n))
return op_done({gen, n})
`,
});

/**
 * Reads one page atomically: the header and up to ARGV[2] entries after
 * position ARGV[1], stopping early once ARGV[3] payload bytes are collected
 * (at least one entry is always returned).
 * KEYS[1] log header hash, KEYS[2] log stream.
 * Returns {} when the log does not exist, else
 * {generation, length, then per entry: id, kind, format-or-reason, payload}.
 */
const READ = redisScript({
  name: "mecatlEventsRead",
  readOnly: true,
  lua: `
local head = redis.call('HMGET', KEYS[1], 'gen', 'n')
if not head[1] then return {} end
local out = {head[1], head[2]}
local from = '0-' .. string.format('%d', tonumber(ARGV[1]) + 1)
local entries = redis.call('XRANGE', KEYS[2], from, '+', 'COUNT', tonumber(ARGV[2]))
local bytes = 0
local limit = tonumber(ARGV[3])
for i, e in ipairs(entries) do
  local f = e[2]
  local body = f[6] or ''
  local size = #body + #f[4]
  if i > 1 and bytes + size > limit then break end
  bytes = bytes + size
  out[#out + 1] = e[1]
  out[#out + 1] = f[2]
  out[#out + 1] = f[4]
  out[#out + 1] = body
end
return out
`,
});

function toBuffer(bytes: Uint8Array): Buffer {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/**
 * EventLogStore on Redis. Per session (all keys hash-tagged by the id): a
 * header hash `gen`/`n` and a stream whose entry ids are `0-<position>`
 * (fields `k` kind, then `f` format and `p` payload for events or `r` reason
 * for gaps). Positions are therefore record counts, exactly as on SQLite,
 * rather than time-based stream ids. Each append is one script; ioredis
 * pipelines concurrent scripts onto the connection and Redis, with
 * `appendfsync always`, fsyncs all writes of one event-loop turn together
 * before replying, so concurrent appends share fsyncs.
 *
 * Deleting the session through the session store deletes both keys (they are
 * in `RedisKeys.sessionData`) and publishes on the change channel, so the next
 * append starts a new generation and followers anywhere wake and expire.
 *
 * Every call is a bounded {@link RedisOperations} operation: an append
 * carries an operation record (a retried append is stored once and answers
 * the first position) and every call fails with a StoreFailure
 * (UNAVAILABLE) after `--store-timeout`.
 */
export class RedisEventLogStore implements EventLogStore {
  readonly feed: RedisChangeFeed;
  private readonly ops: RedisOperations;

  /** @param storeTimeoutMs `--store-timeout` in milliseconds. */
  constructor(
    redis: RedisClient,
    private readonly keys: RedisKeys,
    storeTimeoutMs: number,
  ) {
    this.feed = new RedisChangeFeed(redis, keys, storeTimeoutMs);
    this.ops = new RedisOperations(redis, storeTimeoutMs);
  }

  async append(sessionId: string, record: NewRecord): Promise<Appended> {
    const op = this.ops.begin();
    // The generation this append mints if the log has none yet: 64 random bits, as every operation id.
    const fresh = randomHexId();
    const args: Array<string | Buffer> = record.kind === "event" ? ["e", record.format, toBuffer(record.payload)] : ["g", record.reason, ""];
    const keys = [this.keys.eventLogMeta(sessionId), this.keys.eventLog(sessionId)];
    const [generation, position] = (await op.script(APPEND_SCRIPT, keys, [fresh, this.keys.eventLogChannel(sessionId), ...args, publishCommand(this.ops.redis)], op.record(this.keys.sessionOp(sessionId, op.id)))) as [string, number];
    return { generation, position };
  }

  async readPage(sessionId: string, afterPosition: number, maxRecords: number): Promise<LogPage | undefined> {
    const keys = [this.keys.eventLogMeta(sessionId), this.keys.eventLog(sessionId)];
    const reply = (await this.ops.readScript(READ, keys, [String(afterPosition), String(maxRecords), String(PAGE_BYTES)], true)) as Buffer[];
    if (reply.length === 0) return undefined;
    const records: StoredRecord[] = [];
    for (let i = 2; i + 3 < reply.length; i += 4) {
      const position = Number(reply[i]!.toString("latin1").slice(2));
      const text = reply[i + 2]!.toString("utf8");
      records.push(reply[i + 1]!.toString("latin1") === "e" ? { kind: "event", format: text, payload: reply[i + 3]!, position } : { kind: "gap", reason: text, position });
    }
    return { generation: reply[0]!.toString("latin1"), length: Number(reply[1]!.toString("latin1")), records };
  }
}
