import { afterEach, beforeEach, describe, expect, test, vi } from "vitest";
import { pino } from "pino";
import { Writable } from "node:stream";
import { StoreFailure } from "../../services/storage/store-failure.js";
import { FAILURE_LOG_INTERVAL_MS, StoreFailureLog } from "../../services/server/store-failure-log.js";
import { Metrics } from "../../services/server/metrics.js";
import { v8Collector } from "../../services/storage/v8-collector.js";

/** A pino logger writing synchronously into `lines` (parsed). */
function capturingLogger(lines: Array<Record<string, unknown>>) {
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const l of chunk.toString("utf8").split("\n")) if (l !== "") lines.push(JSON.parse(l) as Record<string, unknown>);
      done();
    },
  });
  return pino({ level: "info" }, sink);
}

async function failuresTotal(metrics: Metrics, kind: string): Promise<number | undefined> {
  const metric = await metrics.storeFailures.get();
  return metric.values.find((v) => v.labels.kind === kind)?.value;
}

/** Repeated identical store failures are logged once per interval with a count (issue 9). */
describe("StoreFailureLog", () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  test("logs the first failure at once, counts repeats, summarises them once per interval, and counts every failure by kind", async () => {
    const lines: Array<Record<string, unknown>> = [];
    const metrics = new Metrics();
    const log = new StoreFailureLog(capturingLogger(lines), metrics);
    const full = new StoreFailure("disk_full", "the disk is full; nothing was written");
    const gone = new StoreFailure("unreachable", "the store is unreachable; nothing was written");

    for (let i = 0; i < 1000; i++) log.record("EventLogService/Append", full);
    log.record("SessionStoreService/Save", gone);
    expect(lines.map((l) => [l.msg, l.kind])).toEqual([
      ["store failure", "disk_full"],
      ["store failure", "unreachable"],
    ]);
    expect(lines[0]).toMatchObject({ rpc: "EventLogService/Append", err: "the disk is full; nothing was written" });

    // End of the first interval: one summary for the failure that repeated, none for the other.
    await vi.advanceTimersByTimeAsync(FAILURE_LOG_INTERVAL_MS);
    expect(lines.slice(2).map((l) => [l.msg, l.kind, l.repeats])).toEqual([["store failure repeated", "disk_full", 999]]);

    // It goes on: still one line per interval.
    for (let i = 0; i < 10; i++) log.record("EventLogService/Append", full);
    await vi.advanceTimersByTimeAsync(FAILURE_LOG_INTERVAL_MS);
    expect(lines.slice(3).map((l) => [l.msg, l.repeats])).toEqual([["store failure repeated", 10]]);

    // A quiet interval closes it; the next occurrence is logged at once again.
    await vi.advanceTimersByTimeAsync(FAILURE_LOG_INTERVAL_MS);
    expect(lines).toHaveLength(4);
    log.record("EventLogService/Append", full);
    expect(lines.at(-1)).toMatchObject({ msg: "store failure", kind: "disk_full" });

    expect(await failuresTotal(metrics, "disk_full")).toBe(1011);
    expect(await failuresTotal(metrics, "unreachable")).toBe(1);
    expect(await failuresTotal(metrics, "not_durable")).toBe(0);
  });

  test("keeps no failure alive while its interval runs: an error's stack frames hold what their closures hold, such as a refused Save's payload", async () => {
    vi.useRealTimers();
    const log = new StoreFailureLog(capturingLogger([]), new Metrics());
    let failure: WeakRef<StoreFailure> | undefined;
    let payload: WeakRef<Uint8Array> | undefined;
    (() => {
      const bytes = new Uint8Array(8 * 1024 * 1024);
      // As the SQLite store's staging does: the error is made by a closure of the scope that holds the payload.
      const late = () => new StoreFailure("unreachable", `did not stage this Save's ${bytes.byteLength} bytes in time; nothing was written`);
      const f = late();
      failure = new WeakRef(f);
      payload = new WeakRef(bytes);
      log.record("SessionStoreService/Save", f);
    })();
    // A WeakRef keeps its target until the turn that made it ends.
    await new Promise((resolve) => setTimeout(resolve, 0));
    await v8Collector()();
    expect(failure!.deref()).toBeUndefined();
    expect(payload!.deref()).toBeUndefined();
  });
});
