import type { Redis } from "ioredis";
import { distinctBy, indexScan, type IndexScan } from "../storage/index-scan.js";
import { redisReader, scoreIndexPages, type ScoredMember } from "../storage/redis-index-page.js";
import type { RedisKeys } from "../storage/redis-keys.js";
import { runScript, redisScript } from "../storage/redis-script.js";
import type { SessionStore, StoredSessionInfo, StoredSnapshot } from "./store.js";

/**
 * Saves a snapshot. Reads the time from the Redis server so every replica of
 * the driver stamps saves with one clock.
 * KEYS[1] snapshot hash, KEYS[2] session index (sorted set).
 * ARGV[1] session id, ARGV[2] format, ARGV[3] payload, ARGV[4] "1" to create only.
 * Returns 1 when stored, 0 when ARGV[4] is "1" and the session exists.
 */
const SAVE = redisScript({
  name: "mecatlSessionSave",
  lua: `
if ARGV[4] == '1' and redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local t = redis.call('TIME')
local us = t[1] .. string.format('%06d', tonumber(t[2]))
redis.call('HSET', KEYS[1], 'format', ARGV[2], 'payload', ARGV[3], 'modified_us', us)
redis.call('ZADD', KEYS[2], us, ARGV[1])
return 1
`,
});

/**
 * Deletes a session and all of its records, then tells whoever listens.
 * KEYS[1] session index, KEYS[2..] every key of the session.
 * ARGV[1] session id, ARGV[2..] channels to PUBLISH an empty message on.
 */
const DELETE = redisScript({
  name: "mecatlSessionDelete",
  lua: `
redis.call('ZREM', KEYS[1], ARGV[1])
for i = 2, #KEYS do redis.call('DEL', KEYS[i]) end
for i = 2, #ARGV do redis.call('PUBLISH', ARGV[i], '') end
return 1
`,
});

function toBuffer(bytes: Uint8Array): Buffer {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

async function* sessionsOf(pages: AsyncIterable<ScoredMember[]>): AsyncGenerator<StoredSessionInfo, void, undefined> {
  for await (const page of pages) for (const e of page) yield { sessionId: e.member, modifiedAtMicros: Number(e.score) };
}

/**
 * SessionStore on Redis: a hash per session (hash-tagged by id) plus a sorted
 * set indexing ids by save time, so List never scans the keyspace. Save and
 * Create are one script each, so the snapshot and its index entry change
 * together. Note the index is a separate slot from the session's keys: on a
 * Redis Cluster these scripts would need the index split per slot.
 */
export class RedisSessionStore implements SessionStore {
  constructor(
    private readonly redis: Redis,
    private readonly keys: RedisKeys,
  ) {}

  async save(sessionId: string, snapshot: StoredSnapshot): Promise<void> {
    await runScript(this.redis, SAVE, [this.keys.snapshot(sessionId), this.keys.sessionIndex()], [sessionId, snapshot.format, toBuffer(snapshot.payload), "0"]);
  }

  async create(sessionId: string, snapshot: StoredSnapshot): Promise<boolean> {
    const r = await runScript(this.redis, SAVE, [this.keys.snapshot(sessionId), this.keys.sessionIndex()], [sessionId, snapshot.format, toBuffer(snapshot.payload), "1"]);
    return r === 1;
  }

  async load(sessionId: string): Promise<StoredSnapshot | undefined> {
    const [format, payload] = await this.redis.hmgetBuffer(this.keys.snapshot(sessionId), "format", "payload");
    if (format === null || payload === null) return undefined;
    return { format: format.toString("utf8"), payload };
  }

  /** Pages through the session index in (save time, id) order; a session re-saved during the scan is kept at its first sighting. */
  scan(): IndexScan<StoredSessionInfo> {
    const index = this.keys.sessionIndex();
    const reader = redisReader(this.redis);
    return indexScan(
      () => distinctBy(sessionsOf(scoreIndexPages(reader, index)), (s) => s.sessionId),
      () => reader.read((r) => r.zcard(index)),
    );
  }

  async delete(sessionId: string): Promise<void> {
    await runScript(this.redis, DELETE, [this.keys.sessionIndex(), ...this.keys.sessionData(sessionId)], [sessionId, ...this.keys.sessionDeleteChannels(sessionId)]);
  }
}
