import { PAYLOAD_HEADROOM_BYTES } from "../../common/payload-headroom.js";
import { sparePayloadMemory } from "../../common/spare-payload-memory.js";
import type { ChainableCommander } from "ioredis";
import { bulkReader } from "../storage/redis-bulk-reader.js";
import type { RedisKeys } from "../storage/redis-keys.js";
import type { RedisOperation, RedisOperations } from "../storage/redis-operation.js";
import { redisScript } from "../storage/redis-script.js";
import { StoreFailure } from "../storage/store-failure.js";
import { SAVE_PROJECTED } from "./redis-metadata.js";

/**
 * Large snapshot payloads on Redis (issue 11). A payload of at most
 * {@link INLINE_PAYLOAD_BYTES} is the `payload` field of the snapshot hash. A
 * larger one would be one multi-MiB command, which Redis executes (and
 * fsyncs) while every other client waits; it is staged instead, one
 * {@link REDIS_CHUNK_BYTES} chunk per command, into a list of its own
 * (`RedisKeys.snapshotStage`), which the Save script then publishes with one
 * RENAME to the session's chunk list (`RedisKeys.snapshotChunks`), in the
 * same atomic, operation-recorded script as the rest of the Save. A staging
 * list that is never published expires.
 */

/** Payload bytes above which a Save is staged in chunks (1 MiB). */
export const INLINE_PAYLOAD_BYTES = 1024 * 1024;

/**
 * Bytes of one staged chunk (512 KiB): a 64 MiB payload is then a list of
 * 128 chunks, more than the 64 elements above which Redis frees a value in
 * the background when it is unlinked.
 */
export const REDIS_CHUNK_BYTES = 512 * 1024;

/**
 * Appends one chunk to a staging list, unless a retry finds it there already.
 * KEYS[1] the staging list.
 * ARGV[1] index of the chunk (0-based), ARGV[2] its bytes, ARGV[3]
 * milliseconds the list lives unless published.
 * Returns the number of chunks the list holds, or -1 when chunks before this
 * one are missing (the list expired). Idempotent: no operation record.
 */
const STAGE_CHUNK = redisScript({
  name: "mecatlSessionStageChunk",
  idempotent: true,
  lua: `
local held = redis.call('LLEN', KEYS[1])
local index = tonumber(ARGV[1])
if held < index then return -1 end
if held == index then held = redis.call('RPUSH', KEYS[1], ARGV[2]) end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return held
`,
});

/** Shortest lifetime of a staging list past its last chunk: 10 s (see {@link stageTtlMs}). */
export const STAGE_MIN_TTL_MS = 10_000;

/**
 * How long a staging list lives past its last chunk unless published, in
 * milliseconds: twice `--store-timeout`, at least {@link STAGE_MIN_TTL_MS}.
 * A Save's staging and publication are bounded by one `--store-timeout`
 * (its wait in the line included), so a list its Save can still publish
 * never expires; one left by a server that stopped mid-way goes soon after
 * (it lived ten times `--store-timeout` before, as long as an operation
 * record: 10 minutes of up to 64 MiB each with `--store-timeout 60s`).
 */
export function stageTtlMs(storeTimeoutMs: number): number {
  return Math.max(STAGE_MIN_TTL_MS, 2 * storeTimeoutMs);
}

/** The failure of a Save whose staged chunks are gone: nothing was written. */
function stageLost(): StoreFailure {
  return new StoreFailure("unreachable", "Redis lost the snapshot staged for this Save (its chunks expired before it was published); nothing was written");
}

/**
 * Stages `payload` in chunks into `stageKey` under operation `op`; returns
 * the number of chunks. The list lives {@link stageTtlMs} past its last
 * chunk unless published. `goOn` runs
 * before every chunk after the first; what it throws stops the staging.
 *
 * @throws StoreFailure when Redis fails (see RedisOperation), or {@link stageLost}.
 */
async function stagePayload(op: RedisOperation, ops: RedisOperations, stageKey: string, payload: Buffer, goOn: () => void): Promise<number> {
  const ttl = stageTtlMs(ops.timeoutMs);
  let index = 0;
  for (let at = 0; at < payload.byteLength; at += REDIS_CHUNK_BYTES, index++) {
    if (index > 0) goOn();
    const held = await op.script(STAGE_CHUNK, [stageKey], [index, payload.subarray(at, at + REDIS_CHUNK_BYTES), ttl]);
    if (held === -1) throw stageLost();
  }
  return index;
}

/** The KEYS and ARGV builder of `RedisSessionMetadata.write` for one Save. */
export interface SaveScriptArgs {
  keys: string[];
  args: (expectedModified?: string, stagedChunks?: string) => string[];
}

/**
 * Runs the Save script (redis-metadata.ts {@link SAVE_PROJECTED}) for
 * operation `op` in `mode` (`save`, `create`, `import`), with the KEYS and
 * ARGV builder `write` of `RedisSessionMetadata.write` for the same
 * operation: a payload over 1 MiB is staged first and published by the
 * script. `write` may still be on its way (a Save's projection, computed
 * while the payload is staged; issue 12): it is awaited once the staging is
 * done, and if it fails the staging is discarded and its error thrown
 * (nothing is written); `goOn`, run before every staged chunk after the
 * first and before a staged payload is published, lets the caller give the
 * Save up by throwing (nothing is written). Returns the script's answer: 1
 * written, 0 not (Create of an existing id).
 *
 * @throws StoreFailure when Redis fails (see RedisOperation), or {@link stageLost}; whatever `write` rejects with or `goOn` throws.
 */
export async function saveSnapshot(
  op: RedisOperation,
  ops: RedisOperations,
  keys: RedisKeys,
  write: SaveScriptArgs | Promise<SaveScriptArgs>,
  snapshot: { sessionId: string; format: string; payload: Buffer; mode: "save" | "create" | "import"; modifiedUs?: string },
  goOn: () => void = () => undefined,
): Promise<number> {
  // Awaited below, unless the staging fails first: that failure is the answer then.
  if (write instanceof Promise) write.catch(() => undefined);
  const stageKey = keys.snapshotStage(snapshot.sessionId, op.id);
  const staged = snapshot.payload.byteLength > INLINE_PAYLOAD_BYTES;
  try {
    const chunks = staged ? String(await stagePayload(op, ops, stageKey, snapshot.payload, goOn)) : "";
    const script = await write;
    if (staged) goOn();
    const argv = [snapshot.sessionId, snapshot.format, staged ? "" : snapshot.payload, snapshot.mode, ...script.args(snapshot.modifiedUs ?? "", chunks)];
    const written = (await op.script(SAVE_PROJECTED, script.keys, argv, op.record(keys.sessionOp(snapshot.sessionId, op.id)))) as number;
    if (written === -1) throw stageLost();
    if (written !== 1 && staged) discardStage(ops, stageKey);
    return written;
  } catch (err) {
    if (staged) discardStage(ops, stageKey);
    throw err;
  }
}

/** Removes a staging list a Save did not publish, in the background (it expires anyway). */
function discardStage(ops: RedisOperations, stageKey: string): void {
  ops.redis.unlink(stageKey).catch(() => undefined);
}

/** What {@link readSnapshot} answers: the format, the payload wherever it is held, and the other fields asked for. */
export interface SnapshotRead {
  format: string;
  payload: Buffer;
  fields: Array<Buffer | null>;
  /** Bytes free before `payload` in its buffer (a payload joined from chunks; see StoredSnapshot.headroom). */
  headroom?: number;
}

/** Bytes of chunks joined between two turns of the event loop (4 MiB: a few milliseconds of copying), so that other calls are answered while a large payload is joined. */
const JOIN_SLICE_BYTES = 4 * 1024 * 1024;

/**
 * Joins a payload's chunks into one buffer with
 * {@link PAYLOAD_HEADROOM_BYTES} free before it (the Load answer is framed
 * there), yielding to the event loop after every {@link JOIN_SLICE_BYTES}
 * (issue 11: one 64 MiB copy into fresh memory held the main thread for
 * 40–200 ms). The buffer is the memory of an earlier large answer when the
 * transport has given one back (common/spare-payload-memory.ts): a copy
 * into memory touched before costs a fraction of one into fresh pages.
 */
async function joinChunks(chunks: Buffer[]): Promise<Buffer> {
  const size = chunks.reduce((n, c) => n + c.length, 0);
  const out = sparePayloadMemory.take(size);
  let at = 0;
  let slice = 0;
  for (let i = 0; i < chunks.length; i++) {
    at += chunks[i]!.copy(out, at);
    slice += chunks[i]!.length;
    if (slice >= JOIN_SLICE_BYTES && at < size) {
      slice = 0;
      await new Promise((resolve) => setImmediate(resolve));
    }
  }
  return out;
}

/** Chunks read by one command of a piecewise read (4: 2 MiB, about 2 ms of redis-server's time). */
export const PIECE_CHUNKS = 4;

/** Piecewise reads tried before a read of all chunks in one command (each fails only when a Save replaced the payload meanwhile). */
const PIECEWISE_ATTEMPTS = 3;

/** {@link readChunksInPieces} found the payload replaced while it read: read again. */
const REPLACED = Symbol("replaced");

/**
 * Runs the commands `build` adds to a MULTI on the bulk reader's connection
 * (storage/redis-bulk-reader.ts: large replies never queue on the shared
 * one) as one read operation, and answers their results in order.
 *
 * @throws StoreFailure when Redis fails (see RedisOperation); the first command's error when one failed.
 */
async function bulkMulti(ops: RedisOperations, build: (multi: ChainableCommander) => ChainableCommander): Promise<unknown[]> {
  const replies = await ops.read(async (r) => build((await bulkReader(r)).multi()).exec());
  if (replies === null) throw new Error("Redis discarded the MULTI");
  for (const [err] of replies) if (err !== null) throw err;
  return replies.map(([, value]) => value);
}

/**
 * Reads a snapshot with the hash fields `fields` besides: one HMGET for a
 * payload held in the hash; for one held in chunks, the chunks on a
 * connection of their own (storage/redis-bulk-reader.ts), in pieces of
 * {@link PIECE_CHUNKS} (see {@link readChunksInPieces}), and if a Save keeps
 * replacing the payload meanwhile, all of them in one MULTI with the hash
 * again, so that they belong to the same Save. Undefined when the session
 * has no snapshot.
 *
 * @throws StoreFailure when Redis fails (see RedisOperation).
 */
export async function readSnapshot(ops: RedisOperations, keys: RedisKeys, sessionId: string, fields: string[] = []): Promise<SnapshotRead | undefined> {
  const hash = keys.snapshot(sessionId);
  const [format, payload, ...rest] = await ops.read((r) => r.hmgetBuffer(hash, "format", "payload", ...fields));
  const held = heldInHash(format, payload, rest);
  if (held !== IN_CHUNKS) return held;
  for (let attempt = 0; attempt < PIECEWISE_ATTEMPTS; attempt++) {
    const read = await readChunksInPieces(ops, keys, sessionId, fields);
    if (read !== REPLACED) return read;
  }
  const [again, chunks] = (await bulkMulti(ops, (m) => m.hmgetBuffer(hash, "format", "payload", ...fields).lrangeBuffer(keys.snapshotChunks(sessionId), 0, -1))) as [
    Array<Buffer | null>,
    Buffer[],
  ];
  const [format2, inline, ...rest2] = again;
  const held2 = heldInHash(format2, inline, rest2);
  return held2 !== IN_CHUNKS ? held2 : joined(format2!, chunks, rest2);
}

/** {@link heldInHash}: the payload is in the session's chunk list. */
const IN_CHUNKS = Symbol("in chunks");

/**
 * What a snapshot hash's `format` and `payload` fields (and the `fields`
 * read with them) say: no snapshot (undefined), a payload held in the hash,
 * or {@link IN_CHUNKS}.
 */
function heldInHash(format: Buffer | null | undefined, payload: Buffer | null | undefined, fields: Array<Buffer | null>): SnapshotRead | undefined | typeof IN_CHUNKS {
  if (format === null || format === undefined) return undefined;
  if (payload !== null && payload !== undefined) return { format: format.toString("utf8"), payload, fields };
  return IN_CHUNKS;
}

/** The snapshot of `format` whose payload is `chunks` joined (with headroom; see {@link joinChunks}). */
async function joined(format: Buffer, chunks: Buffer[], fields: Array<Buffer | null>): Promise<SnapshotRead> {
  return { format: format.toString("utf8"), payload: await joinChunks(chunks), fields, headroom: PAYLOAD_HEADROOM_BYTES };
}

/**
 * Reads a payload held in chunks a few at a time: redis-server runs one
 * command at a time, and `LRANGE 0 -1` of a 64 MiB payload kept it busy
 * 50–60 ms while every other client's command waited (its SLOWLOG on this
 * project's VMs; issue 11). Each piece is a MULTI of `HGET modified_us` and
 * `LRANGE` of {@link PIECE_CHUNKS} chunks, sent one after another; a piece
 * whose `modified_us` differs from the first read's, or a list shorter than
 * the first read counted, means a Save replaced the payload meanwhile
 * ({@link REPLACED}). A Save's `modified_us` identifies it: the Save script
 * sets it with the chunk list, from Redis's clock, and two Saves of chunks
 * of one session are at least two staged chunks (two round trips) apart.
 * `copy` imports keep their source's times, one per snapshot of a session.
 *
 * @throws StoreFailure when Redis fails (see RedisOperation).
 */
async function readChunksInPieces(ops: RedisOperations, keys: RedisKeys, sessionId: string, fields: string[]): Promise<SnapshotRead | undefined | typeof REPLACED> {
  const hash = keys.snapshot(sessionId);
  const list = keys.snapshotChunks(sessionId);
  const [head, count] = (await bulkMulti(ops, (m) => m.hmgetBuffer(hash, "format", "payload", "modified_us", ...fields).llen(list))) as [
    Array<Buffer | null>,
    number,
  ];
  const [format, inline, modified, ...rest] = head;
  const held = heldInHash(format, inline, rest);
  if (held !== IN_CHUNKS) return held;
  if (modified === null || modified === undefined || count === 0) return REPLACED;
  const version = modified.toString("utf8");
  const chunks: Buffer[] = [];
  for (let first = 0; first < count; first += PIECE_CHUNKS) {
    const [now, piece] = (await bulkMulti(ops, (m) => m.hget(hash, "modified_us").lrangeBuffer(list, first, first + PIECE_CHUNKS - 1))) as [
      string | null,
      Buffer[],
    ];
    if (now !== version || piece.length !== Math.min(PIECE_CHUNKS, count - first)) return REPLACED;
    chunks.push(...piece);
  }
  return joined(format!, chunks, rest);
}
