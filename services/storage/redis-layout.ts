import { hash } from "node:crypto";

/** Hash slots of a Redis Cluster (CLUSTER KEYSLOT is CRC16 of the hash tag, modulo this). */
export const CLUSTER_SLOTS = 16384;

/** Partitions of a new Redis store's global indexes (issue 13; the count of an existing store is read from it). */
export const DEFAULT_PARTITIONS = 16;

/** Most partitions a store may record: every partition must have a slot range of its own. */
export const MAX_PARTITIONS = 1024;

/** Ids whose partitions {@link StoreLayout} keeps at most (0.4–1.1 MiB of heap when full, measured: short ASCII ids to 128-character two-byte ones). */
const MEMO_IDS = 4096;
/** Longest id (UTF-16 code units) whose partition {@link StoreLayout} keeps. */
const MEMO_ID_CHARS = 128;

/** CRC16-CCITT (XModem) of `bytes`: the checksum Redis Cluster hashes keys with. */
export function crc16(bytes: Buffer): number {
  let crc = 0;
  for (const b of bytes) {
    crc ^= b << 8;
    for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc;
}

/** The Redis Cluster slot of a hash tag's text (what CLUSTER KEYSLOT answers for `{tag}`). */
export function slotOfTag(tag: string): number {
  return crc16(Buffer.from(tag, "utf8")) % CLUSTER_SLOTS;
}

/**
 * How a Redis store spreads its records over hash slots (issue 13): N
 * partitions, N fixed when the store is created and recorded in it.
 *
 * Every record (session, schedule, fire record) belongs to one partition,
 * chosen from its id ({@link partitionOf}), and every key of the record
 * carries the partition's hash tag ({@link tag}), as do the partition's
 * share of each global index (List, Due, ListSchedules, ListFires, the
 * metadata index). So a record and its index entries live on one slot, and
 * every script that writes them touches one slot, on a Redis Cluster as on a
 * single Redis.
 *
 * Partition p's tag is `p<p>.<k>` with the smallest k that puts it in the
 * p-th of N equal ranges of the 16,384 slots: partitions are spread evenly
 * over the slot space, so a cluster whose primaries hold equal slot ranges
 * holds equal numbers of partitions.
 */
export class StoreLayout {
  private readonly tags: string[];

  /**
   * @param partitions N, 1 to {@link MAX_PARTITIONS}.
   * @throws RangeError for any other N.
   */
  constructor(readonly partitions: number) {
    if (!Number.isInteger(partitions) || partitions < 1 || partitions > MAX_PARTITIONS) throw new RangeError(`a Redis store has 1 to ${MAX_PARTITIONS} partitions, not ${partitions}`);
    this.tags = Array.from({ length: partitions }, (_, p) => {
      const from = Math.floor((p * CLUSTER_SLOTS) / partitions);
      const to = Math.floor(((p + 1) * CLUSTER_SLOTS) / partitions);
      for (let k = 0; ; k++) {
        const slot = slotOfTag(`p${p}.${k}`);
        if (slot >= from && slot < to) return `p${p}.${k}`;
      }
    });
  }

  /**
   * Partitions of recently seen ids: one RPC builds several keys of one id,
   * and a harness calls again and again for the sessions it runs (a Renew
   * every few seconds, an Append per event), so most calls find their id
   * here instead of hashing it (about 2 µs). Emptied once it holds
   * {@link MEMO_IDS} ids, so it never grows past that.
   */
  private readonly memo = new Map<string, number>();

  /** The partition of a record id (session id, schedule name or fire id): the first 4 bytes of SHA-256 of its UTF-8, modulo N. */
  partitionOf(id: string): number {
    let partition = this.memo.get(id);
    if (partition === undefined) {
      partition = hash("sha256", id, "buffer").readUInt32BE(0) % this.partitions;
      if (this.memo.size >= MEMO_IDS) this.memo.clear();
      // Only short ids: a 16 KiB id would make the memo's memory 16 KiB × MEMO_IDS.
      if (id.length <= MEMO_ID_CHARS) this.memo.set(id, partition);
    }
    return partition;
  }

  /** Ids whose partitions are kept now (at most {@link MEMO_IDS}): for tests. */
  get memoizedIds(): number {
    return this.memo.size;
  }

  /** The hash tag text of partition `p` (without braces). */
  tag(p: number): string {
    const t = this.tags[p];
    if (t === undefined) throw new RangeError(`partition ${p} of ${this.partitions}`);
    return t;
  }

  /** The hash tag text of the partition of `id`. */
  tagOf(id: string): string {
    return this.tag(this.partitionOf(id));
  }

  /** Every partition number, 0 to N - 1. */
  all(): number[] {
    return Array.from({ length: this.partitions }, (_, p) => p);
  }
}

/**
 * The hash tag of `key` as Redis Cluster reads it: the text between its
 * first `{` and the first `}` after it, or undefined when there is none or
 * it is empty (the whole key is hashed then).
 */
export function hashTag(key: string): string | undefined {
  const open = key.indexOf("{");
  if (open < 0) return undefined;
  const close = key.indexOf("}", open + 1);
  return close > open + 1 ? key.slice(open + 1, close) : undefined;
}

/**
 * The Redis Cluster slot of `key`: of its {@link hashTag} when it has one,
 * else of the whole key; computed on the UTF-8 bytes, as CLUSTER KEYSLOT does.
 */
export function keySlot(key: string): number {
  return slotOfTag(hashTag(key) ?? key);
}
