import { describe, expect, test } from "vitest";
import { createHash } from "node:crypto";
import { crc16, slotOfTag, StoreLayout } from "../../services/storage/redis-layout.js";
import { RedisKeys } from "../../services/storage/redis-keys.js";

describe("Redis store layout (issue 13)", () => {
  test("crc16 is Redis Cluster's key slot checksum (the example of the cluster spec)", () => {
    expect(crc16(Buffer.from("123456789"))).toBe(0x31c3);
    expect(slotOfTag("a")).toBe(15495);
  });

  test.each([1, 3, 16, 64])("the %i partition tags fall one in each of N equal slot ranges", (n) => {
    const layout = new StoreLayout(n);
    for (const p of layout.all()) {
      const slot = slotOfTag(layout.tag(p));
      expect(slot).toBeGreaterThanOrEqual(Math.floor((p * 16384) / n));
      expect(slot).toBeLessThan(Math.floor(((p + 1) * 16384) / n));
    }
  });

  test("a record's partition is the first 4 bytes of SHA-256 of its id modulo N, as the metadata index always had it", () => {
    const layout = new StoreLayout(16);
    for (const id of ["a", "session-1", "é-🦀", "}", ""]) expect(layout.partitionOf(id)).toBe(createHash("sha256").update(id, "utf8").digest().readUInt32BE(0) % 16);
  });

  test("partitions kept for ids seen before stay right: ids asked again and again, interleaved, more of them than are kept, and long ones", () => {
    const layout = new StoreLayout(16);
    const ids = [...Array.from({ length: 9000 }, (_, i) => `s-${i}`), "L".repeat(16 * 1024), "L".repeat(16 * 1024 - 1)];
    const expected = (id: string) => createHash("sha256").update(id, "utf8").digest().readUInt32BE(0) % 16;
    let most = 0;
    for (let round = 0; round < 3; round++) {
      for (const [i, id] of ids.entries()) {
        expect(layout.partitionOf(id)).toBe(expected(id));
        // A second id between two asks of one, as side-by-side RPCs do.
        const other = ids[(i * 7919) % ids.length]!;
        expect(layout.partitionOf(other)).toBe(expected(other));
        most = Math.max(most, layout.memoizedIds);
      }
    }
    // Bounded: at most 4,096 ids kept, and long ids never.
    expect(most).toBe(4096);
    const fresh = new StoreLayout(16);
    fresh.partitionOf("L".repeat(129));
    fresh.partitionOf("é".repeat(200));
    expect(fresh.memoizedIds).toBe(0);
    fresh.partitionOf("s".repeat(128));
    expect(fresh.memoizedIds).toBe(1);
  });

  test("every key of a record, and its index partitions, carry one hash tag; odd ids (braces) cannot move a key to another slot", () => {
    const keys = new RedisKeys("p:");
    for (const id of ["plain", "}", "{", "a}b{c", "{x}"]) {
      const tag = `{${keys.layout.tagOf(id)}}`;
      const p = keys.layout.partitionOf(id);
      const all = [keys.snapshot(id), keys.lease(id), keys.eventLog(id), keys.eventLogMeta(id), keys.sessionOp(id, "0123456789abcdef"), keys.sessionIndexOf(id), keys.sessionMetaPartition(p), keys.schedule(id), keys.scheduleOp(id, "0123456789abcdef"), keys.scheduleFence(id, "x"), keys.scheduleIndex(p), keys.scheduleDueIndex(p), keys.scheduleFire(id), keys.fireOp(id, "x", "lock"), keys.fireIndexOf(id)];
      for (const k of all) expect(k.slice(k.indexOf("{"), k.indexOf("}") + 1)).toBe(tag);
    }
  });

  test("a partition count outside 1..1024 is refused", () => {
    expect(() => new StoreLayout(0)).toThrow(RangeError);
    expect(() => new StoreLayout(1025)).toThrow(RangeError);
  });

  test("kindOf counts records and nothing else", () => {
    const keys = new RedisKeys("p:");
    expect(keys.kindOf(keys.snapshot("s"))).toEqual({ kind: "sessions", counts: "one" });
    expect(keys.kindOf(keys.eventLog("s"))).toEqual({ kind: "events", counts: "stream" });
    expect(keys.kindOf(keys.lease("s:lease"))).toEqual({ kind: "leases", counts: "one" });
    expect(keys.kindOf(keys.sessionOp("x:snapshot", "0123456789abcdef"))).toEqual({ kind: "other", counts: "none" });
    expect(keys.kindOf(keys.schedule("n"))).toEqual({ kind: "schedules", counts: "one" });
    expect(keys.kindOf(keys.scheduleFire("f"))).toEqual({ kind: "fires", counts: "one" });
    expect(keys.kindOf(keys.fireIndex(3))).toEqual({ kind: "fires", counts: "none" });
    expect(keys.kindOf(keys.config())).toEqual({ kind: "other", counts: "none" });
  });
});
