import type { RedisKeys } from "../storage/redis-keys.js";
import type { RedisOperations } from "../storage/redis-operation.js";
import { redisScript } from "../storage/redis-script.js";
import type { KindStore } from "../storage/copy/kind-store.js";
import { scanIds } from "../storage/copy/redis-scan.js";
import { LOG_CHUNK_RECORDS, chunkOfPage, type EventLogChunk } from "./copy-format.js";
import { RedisEventLogStore } from "./redis.js";

/**
 * Stores a chunk of an event log at its positions, for `mecatl-drivers
 * copy`: sets the generation (refusing another one), adds the records the
 * stream does not hold yet as entries `0-<position>` with the fields the
 * append script writes, and sets the length to the last position held.
 * KEYS[1] log header hash (`gen`, `n`), KEYS[2] log stream.
 * ARGV[1] generation, ARGV[2] position of the first record, then per record
 * three values: `e`, format, payload (event) or `g`, reason, `` (gap).
 * Returns the log's length (recorded), or an error reply when the log has
 * another generation or the chunk would leave a hole.
 */
const IMPORT_CHUNK = redisScript({
  name: "mecatlEventsImport",
  lua: `
local gen = redis.call('HGET', KEYS[1], 'gen')
if gen and gen ~= ARGV[1] then return redis.error_reply('mecatlEventsImport: the log has generation ' .. gen .. ', not ' .. ARGV[1]) end
local n = tonumber(redis.call('HGET', KEYS[1], 'n') or '0')
local pos = tonumber(ARGV[2])
if pos > n + 1 then return redis.error_reply('mecatlEventsImport: the log has ' .. n .. ' records; records from ' .. pos .. ' on would leave a hole') end
for i = 3, #ARGV, 3 do
  if pos > n then
    local id = '0-' .. string.format('%d', pos)
    if ARGV[i] == 'e' then
      redis.call('XADD', KEYS[2], id, 'k', 'e', 'f', ARGV[i + 1], 'p', ARGV[i + 2])
    else
      redis.call('XADD', KEYS[2], id, 'k', 'g', 'r', ARGV[i + 1])
    end
    n = pos
  end
  pos = pos + 1
end
redis.call('HSET', KEYS[1], 'gen', ARGV[1], 'n', string.format('%d', n))
return op_done(n)
`,
});

/**
 * Event logs of a Redis store, as `mecatl-drivers copy` reads and writes
 * them (issue 14; services/storage/copy/kind-store.ts): ids by SCAN of the
 * log headers, chunks read through the store's own page read, and written
 * by {@link IMPORT_CHUNK}, generation and positions kept.
 */
export class RedisEventLogCopy implements KindStore<EventLogChunk> {
  private readonly store: RedisEventLogStore;

  /** @param ops the store's bounded, retried Redis operations (its connection and timeout). */
  constructor(
    private readonly ops: RedisOperations,
    private readonly keys: RedisKeys,
  ) {
    this.store = new RedisEventLogStore(ops.redis, keys, ops.timeoutMs);
  }

  ids(): Promise<string[]> {
    return scanIds(this.ops, this.keys.base, "session", ":events:meta");
  }

  read(requests: readonly { id: string; after: number }[]) {
    return Promise.all(
      requests.map(async (r) => chunkOfPage(r.id, await this.store.readPage(r.id, r.after, LOG_CHUNK_RECORDS))),
    );
  }

  async write(records: readonly EventLogChunk[]): Promise<void> {
    await Promise.all(
      records.map((c) => {
        const args: Array<string | Buffer> = [c.generation, String(c.records[0]!.position)];
        for (const r of c.records) args.push(...(r.kind === "event" ? ["e", r.format, Buffer.from(r.payload.buffer, r.payload.byteOffset, r.payload.byteLength)] : ["g", r.reason, ""]));
        const op = this.ops.begin();
        return op.script(IMPORT_CHUNK, [this.keys.eventLogMeta(c.sessionId), this.keys.eventLog(c.sessionId)], args, op.record(this.keys.sessionOp(c.sessionId, op.id)));
      }),
    );
  }
}
