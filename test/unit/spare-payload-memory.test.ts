import { describe, expect, test } from "vitest";
import { PAYLOAD_HEADROOM_BYTES } from "../../common/payload-headroom.js";
import { SparePayloadMemory } from "../../common/spare-payload-memory.js";

describe("memory kept between large payloads joined on the main thread (issue 11)", () => {
  test("take answers a view of the size asked with the headroom before it; memory given back serves the next take of at most its size", () => {
    const memory = new SparePayloadMemory();
    const first = memory.take(1000);
    expect(first.byteLength).toBe(1000);
    expect(first.byteOffset).toBe(PAYLOAD_HEADROOM_BYTES);
    expect(memory.owns(first.buffer)).toBe(true);
    expect(memory.heldBytes).toBe(0);
    memory.giveBack(first.buffer);
    expect(memory.heldBytes).toBe(PAYLOAD_HEADROOM_BYTES + 1000);
    // Larger than the spare: new memory, the spare stays.
    const larger = memory.take(2000);
    expect(larger.buffer).not.toBe(first.buffer);
    expect(memory.heldBytes).toBe(PAYLOAD_HEADROOM_BYTES + 1000);
    // At most its size: the spare itself, handed out once.
    const again = memory.take(500);
    expect(again.buffer).toBe(first.buffer);
    expect(again.byteLength).toBe(500);
    expect(memory.heldBytes).toBe(0);
    expect(memory.take(500).buffer).not.toBe(first.buffer);
  });

  test("the larger of two buffers given back is kept; foreign memory, a second give-back and a dropped spare are not", () => {
    const memory = new SparePayloadMemory();
    const small = memory.take(100);
    const big = memory.take(10_000);
    memory.giveBack(big.buffer);
    memory.giveBack(small.buffer);
    expect(memory.heldBytes).toBe(PAYLOAD_HEADROOM_BYTES + 10_000);
    memory.giveBack(big.buffer);
    expect(memory.take(10_000).buffer).toBe(big.buffer);
    expect(memory.take(10_000).buffer).not.toBe(big.buffer);
    const foreign = new ArrayBuffer(1 << 20);
    expect(memory.owns(foreign)).toBe(false);
    memory.giveBack(foreign);
    expect(memory.heldBytes).toBe(0);
    memory.giveBack(small.buffer);
    memory.drop();
    expect(memory.heldBytes).toBe(0);
  });
});

describe("memory kept between large requests joined as they arrive (issue 11)", () => {
  test("shared memory without headroom: a later, shorter request gets a view of the spare's start, exactly as long as asked", () => {
    const memory = new SparePayloadMemory<SharedArrayBuffer>(0, (bytes) => new SharedArrayBuffer(bytes));
    const first = memory.take(4096);
    expect(first.buffer).toBeInstanceOf(SharedArrayBuffer);
    expect([first.byteOffset, first.byteLength]).toEqual([0, 4096]);
    first.fill(1);
    memory.giveBack(first.buffer);
    const second = memory.take(100);
    expect(second.buffer).toBe(first.buffer);
    expect([second.byteOffset, second.byteLength]).toEqual([0, 100]);
    // Foreign shared memory (not from take) is never kept.
    memory.giveBack(new SharedArrayBuffer(1 << 20));
    expect(memory.heldBytes).toBe(0);
  });
});
