import type { Backend } from "../storage/backend.js";
import { StoreMeter } from "../storage/store-meter.js";
import type { Logger } from "./logger.js";
import type { Metrics } from "./metrics.js";

/**
 * Keeps the store-size metrics current (issue 14): measures the store at
 * once and then every `intervalMs` milliseconds (`--store-size-interval`),
 * never two measurements at a time, and sets `mecatl_drivers_store_records`,
 * `mecatl_drivers_store_bytes`, `mecatl_drivers_store_measured_timestamp_seconds`
 * and `mecatl_drivers_store_measure_duration_seconds`. Scrapes only read the
 * gauges, so a scrape never costs a measurement. A failed measurement is
 * logged (warn) and leaves the last figures, whose age the timestamp shows.
 *
 * @returns a function that stops the refresh and closes the meter's own
 *   connection (after a measurement in progress).
 */
export async function refreshStoreMetrics(backend: Backend, metrics: Metrics, intervalMs: number, logger: Logger): Promise<() => Promise<void>> {
  const meter = await StoreMeter.beside(backend);
  let running: Promise<void> | undefined;
  let stopped = false;
  const measure = async () => {
    const started = process.hrtime.bigint();
    try {
      for (const s of await meter.measure()) {
        if (s.records !== undefined) metrics.storeRecords.set({ kind: s.kind }, s.records);
        metrics.storeBytes.set({ kind: s.kind }, s.bytes);
      }
      metrics.storeMeasuredAt.set(Date.now() / 1000);
      metrics.storeMeasureSeconds.set(Number(process.hrtime.bigint() - started) / 1e9);
    } catch (err) {
      if (!stopped) logger.warn({ err: (err as Error).message }, "could not measure the store size; the store metrics keep their last values");
    }
  };
  const tick = () => {
    running ??= measure().finally(() => (running = undefined));
  };
  tick();
  const timer = setInterval(tick, intervalMs);
  timer.unref();
  return async () => {
    stopped = true;
    clearInterval(timer);
    await running;
    await meter.close();
  };
}
