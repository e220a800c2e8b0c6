import { randomBytes } from "node:crypto";
import { Command, InvalidArgumentError } from "commander";
import { parseDuration, parseDurationOrZero, parsePositiveInt } from "../../common/flag-parsers.js";
import { addDriverOptions, driverClientOptions, TARGET_ENV, type DriverFlags } from "../driver-flags.js";
import { openDriverClients } from "../factory.js";
import { action, EXIT_INTERRUPTED, printJson, UsageError } from "../cli/output.js";
import { parseCount } from "../cli/common.js";
import { DEFAULT_WORKLOAD, type WorkloadOptions } from "./context.js";
import { disableSchedules, runWorkload } from "./run.js";
import { formatSummary, progressLine, summarize } from "./report.js";

/** A byte size such as `6MiB`, `512KiB` or `1048576`. */
export function parseSize(text: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*(B|KiB|MiB|GiB|KB|MB|GB)?$/i.exec(text.trim());
  if (m === null) throw new InvalidArgumentError(`expected a size such as 6MiB or 512KiB, got ${JSON.stringify(text)}`);
  const unit = (m[2] ?? "B").toLowerCase();
  const factor = { b: 1, kib: 1024, mib: 1024 ** 2, gib: 1024 ** 3, kb: 1e3, mb: 1e6, gb: 1e9 }[unit]!;
  return Math.round(Number(m[1]) * factor);
}

/** Exit status of a run stopped by Ctrl-C whose checks passed (128 + SIGINT, as shells report it). */

interface WorkloadFlags extends DriverFlags {
  duration: number;
  processes: number;
  sessions: number;
  watchers: number;
  schedules: number;
  maxSnapshot: number;
  mediaEvery: number;
  turnPause: number;
  tick: number;
  reconnectEvery: number;
  crashEvery: number;
  drain: number;
  seed: number;
  runId?: string;
  keepData?: boolean;
  outages?: boolean;
  json?: boolean;
  quiet?: boolean;
}

/**
 * `mecatl-drivers workload`: emulates harness processes, watchers and a
 * scheduler against running driver services, prints live progress, then a
 * summary with throughput, latency percentiles per RPC and invariant checks.
 * Exits 1 on any violation, 2 on bad flags, 130 when interrupted (Ctrl-C)
 * with every check passed; an interrupted run still prints its summary and
 * leaves none of its schedules enabled.
 */
export function workloadCommand(): Command {
  const d = DEFAULT_WORKLOAD;
  const cmd = new Command("workload").description(
    "drive the services the way harness processes do (sessions, events, leases, watchers, a scheduler), then check every acknowledged write; exits 1 on any violation",
  );
  addDriverOptions(cmd, ["session-store", "event-log", "session-lease", "schedule-store"]);
  return cmd
    .option("--duration <duration>", "how long the harness processes take turns", parseDuration, d.durationMs)
    .option("--processes <n>", "emulated harness processes (one owner id each)", parsePositiveInt, d.processes)
    .option("--sessions <n>", "concurrent sessions per process", parsePositiveInt, d.sessions)
    .option("--watchers <n>", "followers (ReadAfter with follow) spread over the sessions", parseCount, d.watchers)
    .option("--schedules <n>", "schedules fired every one or two seconds by the scheduler (0: no scheduler)", parseCount, d.schedules)
    .option("--max-snapshot <size>", "a session's snapshot grows to about this size, then the process starts another session", parseSize, d.maxSnapshotBytes)
    .option("--media-every <n>", "every Nth turn carries inline media (0: never)", parseCount, d.mediaEvery)
    .option("--turn-pause <duration>", "pause between the turns of one session (0: none)", parseDurationOrZero, d.turnPauseMs)
    .option("--tick <duration>", "scheduler tick", parseDuration, d.tickMs)
    .option("--reconnect-every <duration>", "watchers drop their stream and resume from their cursor about this often (0: never)", parseDurationOrZero, d.reconnectMs)
    .option("--crash-every <duration>", "about this often a process stops without releasing its leases and restarts as a new owner (0: never); use a short server --lease-ttl", parseDurationOrZero, d.crashEveryMs)
    .option("--drain <duration>", "how long watchers may take to catch up after the turns stop", parseDuration, d.drainMs)
    .option("--seed <n>", "seed of the generated content", parseCount, d.seed)
    .option("--run-id <id>", "prefix of the run's session ids and schedule names (default: random)")
    .option("--keep-data", "keep the run's sessions and schedules instead of deleting them after the checks")
    .option("--outages", "expect the driver or its store to be down at times: retry calls that fail with UNAVAILABLE, and look a write up before sending it again")
    .option("--json", "print the summary as JSON")
    .option("--quiet", "no live progress")
    .action(
      action(async (flags: WorkloadFlags) => {
        if (flags.sessionStoreUrl === undefined) throw new UsageError(`--session-store-url is required; --event-log-url, --session-lease-url and --schedule-store-url enable the other parts (${TARGET_ENV} sets all four)`);
        const options: WorkloadOptions = {
          durationMs: flags.duration,
          processes: flags.processes,
          sessions: flags.sessions,
          watchers: flags.watchers,
          schedules: flags.schedules,
          maxSnapshotBytes: flags.maxSnapshot,
          mediaEvery: flags.mediaEvery,
          turnPauseMs: flags.turnPause,
          tickMs: flags.tick,
          reconnectMs: flags.reconnectEvery,
          crashEveryMs: flags.crashEvery,
          drainMs: flags.drain,
          seed: flags.seed,
          keepData: flags.keepData ?? false,
          outages: flags.outages ?? false,
          runId: flags.runId ?? `wl-${Date.now().toString(36)}-${randomBytes(3).toString("hex")}`,
        };
        const clients = await openDriverClients(driverClientOptions(flags));
        // First Ctrl-C (or SIGTERM): stop the turns, then drain, check, clean up and print the
        // summary as after a full run. Second: disable the run's schedules and quit at once.
        const interrupt = new AbortController();
        const onSignal = () => {
          if (!interrupt.signal.aborted) {
            process.stderr.write("workload: interrupted; finishing the turns, then checking and cleaning up (Ctrl-C again to quit at once)\n");
            interrupt.abort();
            return;
          }
          process.stderr.write("workload: quitting without the checks; the run's schedules are disabled, its data is left in the store\n");
          const quit = () => process.exit(EXIT_INTERRUPTED);
          if (clients.scheduleStore === undefined) quit();
          else void disableSchedules(clients.scheduleStore, options, 5_000).then(quit, quit);
        };
        process.on("SIGINT", onSignal);
        process.on("SIGTERM", onSignal);
        try {
          const result = await runWorkload(
            { sessionStore: clients.sessionStore!, eventLog: clients.eventLog, sessionLease: clients.sessionLease, scheduleStore: clients.scheduleStore },
            options,
            flags.quiet ? undefined : (p) => process.stderr.write(`${progressLine(p)}\n`),
            interrupt.signal,
          );
          const summary = summarize(result);
          if (flags.json) printJson(summary);
          else process.stdout.write(formatSummary(summary));
          process.exitCode = !summary.ok ? 1 : summary.interrupted ? EXIT_INTERRUPTED : 0;
        } finally {
          process.off("SIGINT", onSignal);
          process.off("SIGTERM", onSignal);
          clients.close();
        }
      }),
    );
}
