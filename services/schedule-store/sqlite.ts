import { distinctBy, indexScan, keysetScan, type IndexScan } from "../storage/index-scan.js";
import type { SqliteDatabase } from "../storage/sqlite-database.js";
import type { DueKey } from "./sqlite-ops.js";
import type { ScheduleMutation } from "./rules.js";
import type { ScheduleDocument } from "./schedule.js";
import type { ScheduleStore, StoreReply } from "./store.js";

/**
 * ScheduleStore on SQLite (tables in sqlite-ops.ts). Each mutation is one
 * write operation on the SQLite worker: the rule runs inside the worker's
 * transaction (so two server processes on one file serialise on SQLite's
 * write lock) and is answered after the group commit is fsynced.
 */
export class SqliteScheduleStore implements ScheduleStore {
  constructor(private readonly db: SqliteDatabase) {}

  mutate(m: ScheduleMutation): Promise<StoreReply> {
    return this.db.call("schedule.mutate", m);
  }

  load(name: string): Promise<ScheduleDocument | undefined> {
    return this.db.call("schedule.load", { name });
  }

  scan(): IndexScan<ScheduleDocument> {
    return indexScan(
      () => keysetScan((after: string | undefined) => this.db.call("schedule.listPage", { after })),
      () => this.db.call("schedule.count", {}),
    );
  }

  /** Pages in (due_ms, rowid) order; a schedule claimed ahead of the scan with a fire still due is kept at its first sighting. */
  scanDue(now: bigint): AsyncIterable<ScheduleDocument> {
    return distinctBy(
      keysetScan((after: DueKey | undefined) => this.db.call("schedule.duePage", { now, after })),
      (s) => s.name,
    );
  }

  loadFire(fireId: string): Promise<string | undefined> {
    return this.db.call("schedule.loadFire", { fireId });
  }

  async scanFires(scheduleName: string): Promise<IndexScan<string> | undefined> {
    if (!(await this.db.call("schedule.exists", { name: scheduleName }))) return undefined;
    return indexScan(
      () => keysetScan((after: bigint | undefined) => this.db.call("schedule.firesPage", { scheduleName, after })),
      () => this.db.call("schedule.countFires", { scheduleName }),
    );
  }
}
