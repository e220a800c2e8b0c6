import { afterEach, beforeEach, describe, expect, test, vi } from "vitest";
import { LargeWriteLine } from "../../services/storage/large-write-line.js";

/**
 * Large writes of one store take turns in arrival order (issue 11: a burst
 * of concurrent large Saves staged side by side all ran out of
 * `--store-timeout` together, nearly staged).
 */
describe("LargeWriteLine", () => {
  beforeEach(() => void vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] }));
  afterEach(() => void vi.useRealTimers());

  /** A write that logs its start and end and lasts until `finish` is called (or fails with `fail`). */
  function writeLogged(log: string[], name: string) {
    let finish!: (v: string) => void;
    let fail!: (e: Error) => void;
    const write = () => {
      log.push(`start ${name}`);
      return new Promise<string>((resolve, reject) => {
        finish = (v) => {
          log.push(`end ${name}`);
          resolve(v);
        };
        fail = (e) => {
          log.push(`fail ${name}`);
          reject(e);
        };
      });
    };
    return { write, finish: (v = name) => finish(v), fail: (e: Error) => fail(e) };
  }
  const tooLate = (ahead: number) => new Error(`too late behind ${ahead}`);
  const settled = <T>(p: Promise<T>) => p.then((v) => ({ ok: v }), (e: Error) => ({ err: e.message }));

  test("writes run one at a time, in the order they joined, each answering its own result", async () => {
    const line = new LargeWriteLine();
    const log: string[] = [];
    const [a, b, c] = ["a", "b", "c"].map((n) => writeLogged(log, n));
    const results = [a, b, c].map((w) => settled(line.run(10_000, w!.write, tooLate)));
    await vi.advanceTimersByTimeAsync(0);
    expect(log).toEqual(["start a"]);
    expect(line.length).toBe(3);
    a!.finish();
    await vi.advanceTimersByTimeAsync(0);
    b!.fail(new Error("b broke"));
    await vi.advanceTimersByTimeAsync(0);
    c!.finish();
    expect(await Promise.all(results)).toEqual([{ ok: "a" }, { err: "b broke" }, { ok: "c" }]);
    expect(log).toEqual(["start a", "end a", "start b", "fail b", "start c", "end c"]);
    expect(line.length).toBe(0);
  });

  test("a write whose turn does not come in time does not run, and those behind it still wait for the ones before it", async () => {
    const line = new LargeWriteLine();
    const log: string[] = [];
    const [a, b, c] = ["a", "b", "c"].map((n) => writeLogged(log, n));
    const ra = settled(line.run(10_000, a!.write, tooLate));
    const rb = settled(line.run(500, b!.write, tooLate));
    const rc = settled(line.run(10_000, c!.write, tooLate));
    await vi.advanceTimersByTimeAsync(499);
    expect(log).toEqual(["start a"]);
    await vi.advanceTimersByTimeAsync(1);
    expect(await rb).toEqual({ err: "too late behind 1" });
    await vi.advanceTimersByTimeAsync(1_000);
    expect(log, "c waits for a, not for b").toEqual(["start a"]);
    a!.finish();
    await vi.advanceTimersByTimeAsync(0);
    expect(log).toEqual(["start a", "end a", "start c"]);
    c!.finish();
    expect([await ra, await rc]).toEqual([{ ok: "a" }, { ok: "c" }]);
    expect(line.length).toBe(0);
  });

  test("a write whose caller has gone leaves the line at once with the signal's reason, without running; one gone before joining never joins", async () => {
    const line = new LargeWriteLine();
    const log: string[] = [];
    const [a, b, c, d] = ["a", "b", "c", "d"].map((n) => writeLogged(log, n));
    const caller = new AbortController();
    const ra = settled(line.run(10_000, a!.write, tooLate));
    const rb = settled(line.run(10_000, b!.write, tooLate, caller.signal));
    const rc = settled(line.run(10_000, c!.write, tooLate));
    await vi.advanceTimersByTimeAsync(100);
    caller.abort(new Error("the caller has gone"));
    await vi.advanceTimersByTimeAsync(0);
    expect(await Promise.race([rb, Promise.resolve("still waiting")])).toEqual({ err: "the caller has gone" });
    expect(await settled(line.run(10_000, d!.write, tooLate, caller.signal))).toEqual({ err: "the caller has gone" });
    a!.finish();
    await vi.advanceTimersByTimeAsync(0);
    expect(log, "c runs after a; b and d never run").toEqual(["start a", "end a", "start c"]);
    c!.finish();
    expect([await ra, await rc]).toEqual([{ ok: "a" }, { ok: "c" }]);
    expect(line.length).toBe(0);
  });

  test("a turn that comes only as the wait runs out counts as too late: the write does not run with no time left", async () => {
    const line = new LargeWriteLine();
    const log: string[] = [];
    const [a, b, c] = ["a", "b", "c"].map((n) => writeLogged(log, n));
    const ra = settled(line.run(10_000, a!.write, tooLate));
    // a ends at 500 ms, exactly when b's wait runs out.
    setTimeout(() => a!.finish(), 500);
    const rb = settled(line.run(500, b!.write, tooLate));
    const rc = settled(line.run(10_000, c!.write, tooLate));
    await vi.advanceTimersByTimeAsync(500);
    expect(await ra).toEqual({ ok: "a" });
    expect(await rb).toEqual({ err: "too late behind 1" });
    await vi.advanceTimersByTimeAsync(0);
    expect(log, "b never runs; c goes next").toEqual(["start a", "end a", "start c"]);
    c!.finish();
    expect(await rc).toEqual({ ok: "c" });
    expect(line.length).toBe(0);
  });

  test("an empty line starts a write at once, even with no time to wait", async () => {
    const line = new LargeWriteLine();
    const log: string[] = [];
    const a = writeLogged(log, "a");
    const ra = line.run(0, a.write, tooLate);
    await vi.advanceTimersByTimeAsync(0);
    expect(log).toEqual(["start a"]);
    a.finish();
    expect(await ra).toBe("a");
  });
});
