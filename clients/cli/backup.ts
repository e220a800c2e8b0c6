import { Command } from "commander";
import { SingleBar, Presets } from "cli-progress";
import { action, printJson, printTable, UsageError } from "./output.js";
import { formatBytes } from "./stats.js";

interface BackupFlags {
  store: string;
  to: string;
  json?: boolean;
}

/**
 * `mecatl-drivers backup --store sqlite:PATH --to FILE` (issue 14): an
 * online, consistent backup of an SQLite store while servers write to it
 * (services/copy/backup.ts), checked with `PRAGMA integrity_check`, then the
 * records per kind it holds. Restore with `copy --from sqlite:FILE --to
 * ...`. Exits 2 for a bad store or an existing FILE, 1 when the backup fails.
 */
export function backupCommand(): Command {
  return new Command("backup")
    .description("back up an SQLite store to a new file while servers keep writing to it (SQLite's online backup); restore it with copy --from sqlite:FILE")
    .requiredOption("--store <url>", "the SQLite store to back up: sqlite:PATH (for Redis, see README: RDB/AOF and copy)")
    .requiredOption("--to <file>", "the backup file to create (refused if it exists)")
    .option("--json", "print the result as JSON")
    .action(
      action(async (flags: BackupFlags) => {
        const { backupSqlite } = await import("../../services/copy/backup.js");
        const { StartupError } = await import("../../services/storage/redis-connection.js");
        const { openCopyEndpoint } = await import("../../services/copy/copy-endpoint.js");
        const { storeContents } = await import("../../services/copy/copy-run.js");
        const bar = process.stderr.isTTY ? new SingleBar({ format: "backup |{bar}| {value}/{total} pages | restarts {restarts}", hideCursor: true }, Presets.shades_classic) : undefined;
        let result;
        try {
          result = await backupSqlite(flags.store, flags.to, (p) => {
            if (bar === undefined) return;
            if (bar.getTotal() !== p.pages) bar.start(p.pages, p.pagesDone, { restarts: p.restarts });
            bar.update(p.pagesDone, { restarts: p.restarts });
          });
        } catch (err) {
          if (err instanceof StartupError) throw new UsageError(err.message);
          // SQLite's own words ("database or disk is full") do not say which file: name it.
          if (err instanceof Error && /SQLITE_FULL|disk is full|SQLITE_IOERR|SQLITE_CANTOPEN|SQLITE_READONLY/i.test(`${(err as { code?: string }).code ?? ""} ${err.message}`)) {
            throw new Error(`cannot write the backup --to ${JSON.stringify(flags.to)}: ${err.message} (nothing was kept; free space or choose another directory)`, { cause: err });
          }
          throw err;
        } finally {
          bar?.stop();
        }
        // The backup opens as a store: count what it holds, as copy would read it.
        const backup = await openCopyEndpoint({ store: `sqlite:${result.file}`, redis: {} }, "read");
        const held = await storeContents(backup).finally(() => backup.close());
        if (flags.json) printJson({ ...result, contents: held });
        else {
          process.stdout.write(`backed up ${flags.store} to ${result.file}: ${formatBytes(result.bytes)} in ${result.seconds.toFixed(1)} s (${result.restarts} restarts), integrity ${result.integrity}\n`);
          printTable(["KIND", "COUNT"], Object.entries(held).map(([k, n]) => [k === "events" ? "event logs" : k, n]));
        }
      }),
    );
}
