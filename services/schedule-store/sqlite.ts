import type { SqliteDatabase } from "../storage/sqlite-database.js";
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

  list(): Promise<ScheduleDocument[]> {
    return this.db.call("schedule.list", {});
  }

  due(now: bigint): Promise<ScheduleDocument[]> {
    return this.db.call("schedule.due", { now });
  }

  loadFire(fireId: string): Promise<string | undefined> {
    return this.db.call("schedule.loadFire", { fireId });
  }

  listFires(scheduleName: string): Promise<string[] | undefined> {
    return this.db.call("schedule.listFires", { scheduleName });
  }
}
