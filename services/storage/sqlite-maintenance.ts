import type Database from "better-sqlite3";

/**
 * Giving deleted data's space back on SQLite (issue 14, "space hygiene").
 * Without this, pages freed by deletes stay in the file as free pages
 * forever, and the WAL keeps the size of the largest transaction it ever
 * held (a 300 MB file with a 67 MB WAL after about 190 MB of sessions were
 * deleted). Three mechanisms, all run by the SQLite worker:
 *
 * - **Incremental auto-vacuum** (`PRAGMA auto_vacuum = INCREMENTAL`): free
 *   pages can be moved to the end of the file and cut off, a bounded number
 *   at a time (`PRAGMA incremental_vacuum(N)`). A new file gets it before
 *   its first table is created; an existing file without it needs one
 *   `VACUUM` (a rewrite of the whole file, needing as much free disk as the
 *   file's live data) to switch, done once when the server opens it
 *   ({@link prepareSpace}).
 * - **Steps**, each one `incremental_vacuum` of {@link STEP_PAGES} pages in
 *   its own transaction: between group commits after very large deletes
 *   (while {@link LARGE_FREE_PAGES} or more pages are free), and all the way down
 *   once the worker has been idle for {@link IDLE_MS}.
 * - **WAL truncation**: `journal_size_limit` makes SQLite cut the WAL back
 *   to {@link JOURNAL_SIZE_LIMIT} bytes whenever a checkpoint resets it, and
 *   when idle a `wal_checkpoint(TRUNCATE)` empties it (without waiting for
 *   readers: if one holds an old snapshot, it is tried at the next idle).
 */

/**
 * Pages one step moves and cuts off at most (1 MiB at 4 KiB pages: a few
 * milliseconds). Small, because a write that arrives during a step waits
 * for it (issue 11: Renew latency while 64 MiB Saves free 64 MiB each).
 */
export const STEP_PAGES = 256;

/**
 * Free pages from which steps run between group commits, not only when idle
 * (256 MiB at 4 KiB pages: a large delete under constant load). Below it,
 * free pages wait for an idle second: new writes reuse them meanwhile, and
 * a step between commits costs a transaction and an fsync that the next
 * write waits for (issue 11: a loop of 64 MiB Saves frees and reuses 64 MiB
 * per Save).
 */
export const LARGE_FREE_PAGES = 65536;

/** Milliseconds without any operation after which the worker vacuums and truncates the WAL. */
export const IDLE_MS = 1000;

/** Bytes the WAL is cut back to after a checkpoint resets it. */
export const JOURNAL_SIZE_LIMIT = 16 * 1024 * 1024;

const AUTO_VACUUM_NAMES = ["none", "full", "incremental"];

/** How the file gives space back, as opened (logged with `listening`). */
export interface SqliteSpaceSettings {
  /** `PRAGMA auto_vacuum` in force: `incremental` once switched. */
  autoVacuum: string;
  /** Milliseconds the one-time VACUUM that switched an existing file took, when it ran at this open. */
  vacuumMs?: number;
  /** Why the switch did not happen at this open (it is tried again at the next one). */
  vacuumProblem?: string;
}

/**
 * Sets up space reclamation on a read-write connection, before the
 * migrations run: the WAL size limit, and incremental auto-vacuum (on a new
 * file at once; on an existing file by one VACUUM, which may take seconds
 * per hundred MiB). A VACUUM that fails (another process holds the file,
 * the disk lacks room for the rewrite) leaves the file as it was and is
 * reported in `vacuumProblem`.
 */
export function prepareSpace(db: Database.Database): SqliteSpaceSettings {
  db.pragma(`journal_size_limit = ${JOURNAL_SIZE_LIMIT}`);
  const mode = () => AUTO_VACUUM_NAMES[Number(db.pragma("auto_vacuum", { simple: true }))] ?? "none";
  if (mode() === "incremental") return { autoVacuum: "incremental" };
  db.pragma("auto_vacuum = INCREMENTAL");
  // A file without tables takes the setting at once; one with tables needs the rewrite.
  if (mode() === "incremental") return { autoVacuum: "incremental" };
  // A new file in WAL mode has a first page already, so it is rewritten too, in a few ms: not worth reporting as a switch.
  const fresh = (db.prepare("SELECT count(*) AS n FROM sqlite_schema").get() as { n: number }).n === 0;
  const started = performance.now();
  try {
    db.exec("VACUUM");
    // In WAL mode the rewritten file is in the WAL until a checkpoint copies it back and cuts the file.
    db.pragma("wal_checkpoint(TRUNCATE)");
  } catch (err) {
    return { autoVacuum: mode(), vacuumProblem: (err as Error).message };
  }
  return fresh ? { autoVacuum: mode() } : { autoVacuum: mode(), vacuumMs: Math.round(performance.now() - started) };
}

/**
 * The worker's periodic space work (see the module comment). The worker
 * calls {@link afterDrain} after each batch it answered; `busy` tells
 * whether requests are waiting, in which case idle work waits too.
 * Never throws: a step that fails (the disk is full, another process holds
 * the lock) is left for the next occasion.
 */
export class SqliteMaintenance {
  private idleTimer: NodeJS.Timeout | undefined;
  /** `performance.now()` of the last batch: the idle pass runs {@link IDLE_MS} after it. */
  private lastBatch = 0;
  /** Writes committed since the last idle pass. */
  private dirty = false;
  private stopped = false;
  /**
   * Prepared once: `db.pragma()` prepares its statement on every call, which
   * cost about a tenth of the writer's CPU when it ran after every batch
   * (perf of the writer thread under 64 Renews in flight, issue 11).
   */
  private readonly freelistCount: Database.Statement<[], number>;

  constructor(
    private readonly db: Database.Database,
    private readonly busy: () => boolean,
  ) {
    this.freelistCount = db.prepare<[], number>("PRAGMA freelist_count").pluck();
  }

  private freePages(): number {
    return Number(this.freelistCount.get());
  }

  /** One bounded step; returns true while free pages remain. */
  private step(): boolean {
    try {
      this.db.pragma(`incremental_vacuum(${STEP_PAGES})`);
      return this.freePages() > 0;
    } catch {
      return false;
    }
  }

  /**
   * After a batch: a step when many pages are free, and the idle pass put
   * off to {@link IDLE_MS} from now. One timer serves many batches: when it
   * fires before the worker has been quiet that long, it is set again for
   * the rest (clearing and setting a timer after every batch cost more).
   */
  afterDrain(writes: number): void {
    if (this.stopped) return;
    this.lastBatch = performance.now();
    if (writes > 0) {
      this.dirty = true;
      if (this.freePages() >= LARGE_FREE_PAGES) this.step();
    }
    this.idleTimer ??= setTimeout(() => this.whenQuiet(), IDLE_MS);
  }

  /** The idle timer fired: the idle pass if no batch came for {@link IDLE_MS}, else the timer again for the time left. */
  private whenQuiet(): void {
    this.idleTimer = undefined;
    const quietMs = performance.now() - this.lastBatch;
    if (quietMs < IDLE_MS) this.idleTimer = setTimeout(() => this.whenQuiet(), IDLE_MS - quietMs);
    else this.idle();
  }

  /**
   * After the start-up tasks (sqlite-registry.ts `sqliteStartupTasks`): the
   * same idle pass as after a write, since they may have freed pages (the
   * staged chunks of a process that stopped mid-way are removed at start:
   * ~60 MiB of free pages and a 24 MB WAL stayed until the first write came).
   */
  afterStart(): void {
    this.afterDrain(1);
  }

  /**
   * Idle: steps until nothing is free (yielding between steps, and putting
   * the rest off again when a batch came meanwhile), then an empty WAL.
   */
  private idle(): void {
    if (this.stopped || !this.dirty) return;
    if (this.busy()) return;
    if (this.freePages() > 0 && this.step()) {
      this.idleTimer = setTimeout(() => this.whenQuiet(), 0);
      return;
    }
    this.dirty = false;
    const busyTimeout = Number(this.db.pragma("busy_timeout", { simple: true }));
    try {
      this.db.pragma("busy_timeout = 0");
      this.db.pragma("wal_checkpoint(TRUNCATE)");
    } catch {
      // a reader or another writer holds the WAL: next time
    } finally {
      this.db.pragma(`busy_timeout = ${busyTimeout}`);
    }
  }

  /** Stops the timer (the database is closing). */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.idleTimer);
  }
}
