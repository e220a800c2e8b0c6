import { Command } from "commander";
import { addDriverOptions, driverClientOptions, TARGET_ENV, URL_FLAG_KEYS, type UrlFlag } from "../driver-flags.js";
import { DriverConnections } from "../transport.js";
import { checkHealth } from "../health-client.js";
import type { CommonFlags } from "./common.js";
import { action, printJson, printTable, UsageError } from "./output.js";

const SERVICE_OF: Record<UrlFlag, string> = {
  "session-store": "mecatl.driver.v1.SessionStoreService",
  "event-log": "mecatl.driver.v1.EventLogService",
  "session-lease": "mecatl.driver.v1.SessionLeaseService",
  "schedule-store": "mecatl.driver.v1.ScheduleStoreService",
};

interface HealthRow {
  target: string;
  service: string;
  status: string;
  error?: string;
}

/**
 * `mecatl-drivers health`: asks grpc.health.v1 on every distinct target
 * given by the `--*-url` flags, for the server as a whole and for the service
 * each flag names. Exits 1 unless everything is SERVING.
 */
export function healthCommand(): Command {
  const urls = Object.keys(SERVICE_OF) as UrlFlag[];
  return addDriverOptions(new Command("health").description("check that the driver services are SERVING (grpc.health.v1); exits 1 otherwise"), urls)
    .option("--json", "print JSON for scripts instead of a table")
    .action(
      action(async (flags: CommonFlags) => {
        const byTarget = new Map<string, string[]>();
        for (const u of urls) {
          const target = flags[URL_FLAG_KEYS[u]];
          if (target === undefined) continue;
          byTarget.set(target, [...(byTarget.get(target) ?? [""]), SERVICE_OF[u]]);
        }
        if (byTarget.size === 0) throw new UsageError(`give at least one of ${urls.map((u) => `--${u}-url`).join(", ")}, or set ${TARGET_ENV}`);
        const options = driverClientOptions(flags);
        const connections = new DriverConnections({ tls: options.tls, authToken: options.authToken });
        const rows: HealthRow[] = [];
        try {
          for (const [target, services] of byTarget) {
            const transport = connections.transport(target);
            try {
              for (const s of await checkHealth(transport, services)) rows.push({ target, service: s.service || "(server)", status: s.status });
            } catch (err) {
              rows.push({ target, service: "(server)", status: "UNREACHABLE", error: (err as Error).message });
            }
          }
        } finally {
          connections.close();
        }
        if (flags.json) printJson(rows);
        else printTable(["TARGET", "SERVICE", "STATUS", "ERROR"], rows.map((r) => [r.target, r.service, r.status, r.error]));
        if (rows.some((r) => r.status !== "SERVING")) process.exitCode = 1;
      }),
    );
}
