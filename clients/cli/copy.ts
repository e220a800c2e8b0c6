import { Command, InvalidArgumentError, Option } from "commander";
import { addSideStoreOptions, redisFlagsGiven, sideStoreFlags, storeBackendOptions, type StoreSide } from "../../services/server/store-options.js";
import type { AdmitStore, CopyAccess, CopyEndpoint } from "../../services/copy/copy-endpoint.js";
import type { KindVerdict } from "../../services/copy/verify.js";
import { parseSize } from "../workload/command.js";
import { action, EXIT_FAILURE, EXIT_INTERRUPTED, printJson, printTable, UsageError } from "./output.js";
import { formatBytes } from "./stats.js";


/** Default `--batch-size`: payload bytes per batch written (one transaction on SQLite, one pipeline on Redis). */
const DEFAULT_BATCH_BYTES = 4 * 1024 * 1024;

/** Records per batch at most, whatever their size. */
const BATCH_RECORDS = 5000;

interface CopyFlags extends Record<string, unknown> {
  replace?: boolean;
  resume?: boolean;
  verifyOnly?: boolean;
  batchSize: number;
  toRedisDurability: "strict" | "relaxed";
  json?: boolean;
}

/** `--batch-size`: a size (parseSize) of at least one byte. */
function batchSize(text: string): number {
  const n = parseSize(text);
  if (n < 1) throw new InvalidArgumentError(`expected a size of at least 1 byte (a batch carries at least one record), got ${JSON.stringify(text)}`);
  return n;
}

/**
 * Refuses one side's Redis flags with an SQLite store, as `serve` refuses
 * them (they would be accepted and ignored).
 *
 * @throws UsageError naming the first such flag of that side.
 */
function refuseRedisFlagsForSqlite(flags: CopyFlags, side: StoreSide): void {
  const store = sideStoreFlags(flags, side);
  if (typeof store.store !== "string" || !store.store.startsWith("sqlite:")) return;
  const given = redisFlagsGiven(store).map((f) => f.replace("--redis-", `--${side}-redis-`));
  if (side === "to" && flags.toRedisDurability !== "strict") given.push("--to-redis-durability");
  if (given.length > 0) throw new UsageError(`${given[0]} applies to Redis stores only, and --${side} is ${JSON.stringify(store.store)}; drop the flag or use a Redis --${side} (redis://, rediss://, redis+cluster:// or rediss+cluster://)`);
}

/** Opens one side, turning a store problem into a usage error that names that side's flags. */
async function open(flags: CopyFlags, side: StoreSide, access: CopyAccess, admit?: AdmitStore): Promise<CopyEndpoint> {
  const { openCopyEndpoint } = await import("../../services/copy/copy-endpoint.js");
  const { StartupError } = await import("../../services/storage/redis-connection.js");
  const store = sideStoreFlags(flags, side);
  if (typeof store.store !== "string") throw new UsageError(`--${side} is required: the store to copy ${side} (sqlite:PATH, redis://HOST:PORT[/DB] or rediss://HOST:PORT[/DB])`);
  const options = storeBackendOptions(store);
  if (side === "to") options.redis.durability = flags.toRedisDurability;
  try {
    return await openCopyEndpoint(options, access, admit);
  } catch (err) {
    if (err instanceof StartupError) throw new UsageError(err.message.replaceAll("--store", `--${side}`).replaceAll("--redis-", `--${side}-redis-`));
    throw err;
  }
}

/** Prints the verdicts: a table per kind (or JSON), and the differing ids. Returns true when every kind is the same on both sides. */
function report(verdicts: KindVerdict[], json: boolean, extra: Record<string, unknown>): boolean {
  const ok = verdicts.every((v) => v.same);
  if (json) {
    printJson({ ok, ...extra, kinds: verdicts });
    return ok;
  }
  printTable(
    ["KIND", "SOURCE", "TARGET", "SOURCE DIGEST", "TARGET DIGEST", "RESULT"],
    verdicts.map((v) => [v.kind, v.source.records, v.target.records, v.source.digest.slice(0, 16), v.target.digest.slice(0, 16), v.same ? "same" : `${v.differing} differ`]),
  );
  for (const v of verdicts) for (const d of v.differences) process.stdout.write(`${v.kind} ${JSON.stringify(d.id)}: ${d.what}\n`);
  return ok;
}

/**
 * `mecatl-drivers copy --from URL --to URL` (issue 14): copies everything
 * one store holds into another (any backend to any backend) with cursors,
 * save times, lease tokens and schedules intact, shows progress, resumes
 * after Ctrl-C (`--resume`), and verifies both sides at the end. Exit
 * status: 0 when the target holds exactly what the source holds, 1 on a
 * difference or a store failure, 2 for bad flags or a refused target
 * (non-empty, nothing to resume), 130 when interrupted.
 */
export function copyCommand(): Command {
  const cmd = new Command("copy").description(
    "copy everything one store holds (sessions, lineage, event logs, leases, schedules, fires) into another, then verify both sides; stop the servers' writers first",
  );
  addSideStoreOptions(cmd, "from", "source store");
  addSideStoreOptions(cmd, "to", "target store");
  cmd
    .addOption(new Option("--to-redis-durability <mode>", "target store: strict refuses a Redis without appendonly yes + appendfsync always, as serve does").choices(["strict", "relaxed"]).default("strict"))
    .option("--replace", "erase everything the target holds before copying (it must otherwise be empty: no session, lineage record, event log, lease, schedule or fire)")
    .option("--resume", "continue the interrupted copy recorded in the target (same --from and --to)")
    .option("--verify-only", "copy nothing: compare both stores (counts and content digests per kind) and exit 1 on any difference")
    .option("--batch-size <size>", "payload bytes written per batch, at least 1 (one transaction or pipeline; the checkpoint --resume continues from)", batchSize, DEFAULT_BATCH_BYTES)
    .option("--json", "print the report as JSON")
    .addHelpText(
      "after",
      `
Stop every writer of the source first (stop its servers, or at least the harness): a record
written during the copy may be missed, and the verification then fails. The target must be
empty unless --replace is given; an interrupted copy (Ctrl-C, exit 130) is continued by the
same command with --resume. Keep servers off the target until copy exits 0.`,
    )
    .action(async (flags: CopyFlags) => {
      await action(runCopy)(flags);
      // ioredis's reply parser keeps a timer for a few seconds after large replies; nothing is left to wait for.
      process.exit();
    });
  return cmd;
}

/** The `copy` action: verify only, or copy (fresh, replacing, resuming) and verify; sets the exit status. */
async function runCopy(flags: CopyFlags): Promise<void> {
  if (flags.replace && flags.resume) throw new UsageError("--replace and --resume exclude each other: --replace starts over, --resume continues");
  const { copyStore, CopyInterrupted, CopyRefused } = await import("../../services/copy/copy-run.js");
  const { verifyStores } = await import("../../services/copy/verify.js");
  const { CopyProgressView } = await import("./copy-progress.js");
  refuseRedisFlagsForSqlite(flags, "from");
  refuseRedisFlagsForSqlite(flags, "to");
  const { sharedStore } = await import("../../services/copy/store-identity.js");
  const source = await open(flags, "from", "read");
  let target: CopyEndpoint;
  try {
    // --verify-only writes nothing: its target is read like a source (it must exist, and is not migrated).
    // Refused before anything is written to it: a target that is (or overlaps) the source, whatever text names them.
    target = await open(flags, "to", flags.verifyOnly ? "read" : "write", (identity) => {
      const why = sharedStore(source.identity, identity);
      if (why !== undefined) throw new UsageError(`--from and --to name the same store (${why}): ${flags.verifyOnly ? "there is nothing to compare" : "copying would erase or overwrite the source"}; choose another --to`);
    });
  } catch (err) {
    await source.close();
    throw err;
  }
  const view = new CopyProgressView();
  const interrupt = new AbortController();
  const onSignal = () => {
    if (interrupt.signal.aborted) {
      view.note("copy: quitting at once; the target keeps its last checkpoint, continue with --resume");
      process.exit(EXIT_INTERRUPTED);
    }
    view.note("copy: interrupted; finishing the batch being written (Ctrl-C again to quit at once)");
    interrupt.abort();
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  const started = performance.now();
  try {
    if (flags.verifyOnly) {
      const verdicts = await verifyStores(source, target, (p) => view.verify(p));
      view.stop();
      if (!report(verdicts, flags.json === true, { verifiedSeconds: (performance.now() - started) / 1000 })) process.exitCode = EXIT_FAILURE;
      return;
    }
    let copiedAt = started;
    let before = { records: 0, bytes: 0 };
    const { verdicts, done } = await copyStore(source, target, {
      replace: flags.replace === true,
      resume: flags.resume === true,
      batchBytes: flags.batchSize,
      batchRecords: BATCH_RECORDS,
      signal: interrupt.signal,
      onStart: ({ resumed, done }) => {
        before = Object.values(done).reduce((t, d) => ({ records: t.records + d.records, bytes: t.bytes + d.bytes }), { records: 0, bytes: 0 });
        if (resumed) view.note(`copy: resuming ${target.description}: ${before.records} records (${formatBytes(before.bytes)}) were copied before`);
      },
      onCopy: (p) => view.copy(p),
      onCopied: () => (copiedAt = performance.now()),
      onVerify: (p) => view.verify(p),
    }).catch((err: unknown) => {
      if (err instanceof CopyRefused) throw new UsageError(err.message);
      throw err;
    });
    view.stop();
    const copySeconds = (copiedAt - started) / 1000;
    const verifySeconds = (performance.now() - copiedAt) / 1000;
    const records = Object.values(done).reduce((n, d) => n + d.records, 0) - before.records;
    const ok = report(verdicts, flags.json === true, { copySeconds, verifySeconds, recordsCopied: records, recordsCopiedBefore: before.records });
    if (!flags.json) {
      const rate = copySeconds > 0 ? ` (${Math.round(records / copySeconds)} records/s)` : "";
      const resumed = before.records > 0 ? ` (after ${before.records} copied before)` : "";
      process.stdout.write(`${ok ? "copied and verified" : "copied, but the target DIFFERS from the source"}: ${records} records${resumed} in ${copySeconds.toFixed(1)} s${rate}, verified in ${verifySeconds.toFixed(1)} s\n`);
    }
    if (!ok) process.exitCode = EXIT_FAILURE;
  } catch (err) {
    view.stop();
    if (err instanceof CopyInterrupted) {
      const n = Object.values(err.done).reduce((t, d) => t + d.records, 0);
      process.stderr.write(`mecatl-drivers: copy interrupted after ${n} records; run the same command with --resume to continue\n`);
      process.exitCode = EXIT_INTERRUPTED;
      return;
    }
    throw err;
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    await Promise.all([source.close(), target.close()]);
  }
}
