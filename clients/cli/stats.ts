import { Command } from "commander";
import type { StoreMeter } from "../../services/storage/store-meter.js";
import { addStoreOptions, storeBackendOptions, type StoreFlags } from "../../services/server/store-options.js";
import { action, printJson, printTable, UsageError } from "./output.js";

/** Bytes for people: `512 B`, `1.5 KiB`, `12.0 MiB`, `3.2 GiB`. */
export function formatBytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${n} B` : `${v.toFixed(1)} ${units[i]}`;
}

/**
 * `mecatl-drivers stats`: counts and sizes per kind (sessions, events,
 * leases, schedules, fires) of a store, measured now by opening it directly,
 * read-only (issue 14): the same figures a server publishes as
 * `mecatl_drivers_store_records` / `mecatl_drivers_store_bytes`. Exits 2 for a
 * bad or unreachable `--store`.
 */
export function statsCommand(): Command {
  return addStoreOptions(new Command("stats").description("count the records and bytes per kind (sessions, events, leases, schedules, fires) in a store, opened read-only"))
    .option("--json", "print JSON for scripts instead of a table")
    .action(
      action(async (flags: StoreFlags & { json?: boolean }) => {
        // Loaded here, not at start-up: the store code (ioredis, the SQLite worker) would slow every other command.
        const { StoreMeter } = await import("../../services/storage/store-meter.js");
        const { StartupError } = await import("../../services/storage/redis-connection.js");
        let meter: StoreMeter;
        try {
          meter = await StoreMeter.open(storeBackendOptions(flags));
        } catch (err) {
          if (err instanceof StartupError) throw new UsageError(err.message);
          throw err;
        }
        try {
          const sizes = await meter.measure();
          if (flags.json) printJson(sizes);
          else printTable(["KIND", "RECORDS", "BYTES", "SIZE"], sizes.map((s) => [s.kind, s.records, s.bytes, formatBytes(s.bytes)]));
        } finally {
          await meter.close();
        }
      }),
    );
}
