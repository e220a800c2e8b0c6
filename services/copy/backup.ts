import Database from "better-sqlite3";
import { closeSync, existsSync, fsyncSync, openSync, renameSync, rmSync } from "node:fs";
import { dirname } from "node:path";
import { StartupError } from "../storage/redis-connection.js";
import { parseSqliteStoreUrl } from "../storage/sqlite-path.js";

/** Pages copied per step while the source is quiet (16 MiB at 4 KiB pages): between steps the backup yields, and progress is reported. */
export const PAGES_PER_STEP = 4096;

/** Progress of a backup: pages of the source copied so far and in all. */
export interface BackupProgress {
  pagesDone: number;
  pages: number;
  /** Times the backup started over because another connection wrote to the source. */
  restarts: number;
}

/** What a finished backup holds. */
export interface BackupResult {
  /** The backup file (renamed into place once complete and checked). */
  file: string;
  pages: number;
  bytes: number;
  restarts: number;
  seconds: number;
  /** `ok`, from `PRAGMA integrity_check` on the finished backup. */
  integrity: string;
}

function fsyncPath(path: string): void {
  const fd = openSync(path, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/**
 * `mecatl-drivers backup --store sqlite:PATH --to FILE` (issue 14): copies
 * the SQLite database with SQLite's online backup API (better-sqlite3
 * `db.backup()`) from a read-only connection, while servers keep writing
 * (WAL: the reader never blocks them). The backup is one consistent
 * snapshot: while the source is quiet it goes {@link PAGES_PER_STEP} pages
 * a step (reporting progress); SQLite starts a backup over when another
 * connection writes between two steps, so after the first restart the rest
 * is copied in a single step, inside one read transaction. The copy goes to
 * `FILE.partial`, is checked with `PRAGMA integrity_check`, fsynced, and
 * only then renamed to FILE.
 *
 * @throws StartupError for a store that is not an SQLite file, a missing
 *   source, an existing FILE or a missing directory; Error when the backup
 *   fails or the finished copy does not pass the integrity check (FILE is
 *   then not created).
 */
export async function backupSqlite(store: string, file: string, onProgress?: (p: BackupProgress) => void): Promise<BackupResult> {
  if (!store.startsWith("sqlite:")) {
    throw new StartupError(
      `--store ${store}: backup takes an SQLite store; back up Redis with its own persistence (an RDB snapshot, BGSAVE, or the AOF files) and restore with copy --from (see README "Moving and backing up data")`,
    );
  }
  const target = parseSqliteStoreUrl(store);
  if (target.memory) throw new StartupError(`--store ${store}: sqlite::memory: lives only inside its own process; back up an SQLite file`);
  if (!existsSync(target.path)) throw new StartupError(`--store ${store}: no such database file`);
  if (existsSync(file)) throw new StartupError(`--to ${file} exists; back up to a new file (a backup never overwrites one)`);
  if (!existsSync(dirname(file))) throw new StartupError(`--to ${file}: the directory ${dirname(file)} does not exist`);
  const partial = `${file}.partial`;
  rmSync(partial, { force: true });
  const started = performance.now();
  const source = new Database(target.path, { readonly: true, fileMustExist: true });
  let restarts = 0;
  let last = { pagesDone: 0, pages: 0 };
  try {
    source.pragma("busy_timeout = 5000");
    const done = await source.backup(partial, {
      progress: ({ totalPages, remainingPages }) => {
        const pagesDone = totalPages - remainingPages;
        // A step after a restart copies from page 1 again: no progress (pages done the same as
        // after the step before, as when the restart came after the first step) is a restart too.
        if (last.pagesDone > 0 && pagesDone <= last.pagesDone) restarts++;
        last = { pagesDone, pages: totalPages };
        onProgress?.({ ...last, restarts });
        return restarts > 0 ? 0x7fffffff : PAGES_PER_STEP;
      },
    });
    last = { pagesDone: done.totalPages, pages: done.totalPages };
  } catch (err) {
    rmSync(partial, { force: true });
    throw err;
  } finally {
    source.close();
  }
  const copy = new Database(partial, { fileMustExist: true });
  let integrity: string;
  let bytes: number;
  try {
    integrity = (copy.pragma("integrity_check") as Array<{ integrity_check: string }>).map((r) => r.integrity_check).join("; ");
    bytes = Number(copy.pragma("page_count", { simple: true })) * Number(copy.pragma("page_size", { simple: true }));
  } finally {
    copy.close();
  }
  if (integrity !== "ok") {
    rmSync(partial, { force: true });
    throw new Error(`the backup did not pass PRAGMA integrity_check (${integrity}); nothing was written to ${file}`);
  }
  fsyncPath(partial);
  renameSync(partial, file);
  fsyncPath(dirname(file));
  onProgress?.({ ...last, restarts });
  return { file, pages: last.pages, bytes, restarts, seconds: (performance.now() - started) / 1000, integrity };
}
