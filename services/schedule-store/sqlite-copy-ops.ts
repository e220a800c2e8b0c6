import { readOp, writeOp } from "../storage/sqlite-op.js";
import { copyStatement, idsOp } from "../storage/copy/sqlite-copy-op.js";
import { wholeRecords, type CopyReadRequest } from "../storage/copy/kind-store.js";
import { copiedDueKey, type FireCopy, type ScheduleCopy } from "./copy-format.js";

interface ScheduleRow {
  spec: string;
  placement_owned: number;
  max_fires: bigint;
  state: string;
}

/**
 * The schedule store's copy operations on the SQLite worker (issue 14; see
 * services/storage/copy/kind-store.ts): `schedule.copy.ids`,
 * `schedule.copy.read` {requests} → {@link ScheduleCopy},
 * `schedule.copy.write` {records} (the Due index key computed from the
 * copied State); `schedule.copy.fireIds`, `schedule.copy.fireRead`,
 * `schedule.copy.fireWrite` for fire records; `schedule.copy.erase` removes
 * every schedule and fire record.
 */
export const scheduleCopyOps = {
  "schedule.copy.ids": idsOp(`SELECT name FROM schedules`),
  "schedule.copy.read": readOp((db, a: { requests: CopyReadRequest[] }) => {
    const get = copyStatement<[string], ScheduleRow>(db, `SELECT spec, placement_owned, max_fires, state FROM schedules WHERE name = ?`).safeIntegers(true);
    return wholeRecords(a.requests, (name): ScheduleCopy | undefined => {
      const row = get.get(name);
      return row === undefined ? undefined : { name, spec: row.spec, placementOwned: Number(row.placement_owned) === 1, maxFires: row.max_fires.toString(), state: row.state };
    });
  }),
  "schedule.copy.write": writeOp((db, a: { records: ScheduleCopy[] }) => {
    const put = copyStatement(db, 
      `INSERT INTO schedules (name, spec, placement_owned, max_fires, state, due_ms) VALUES (?, ?, ?, ?, ?, ?)
       ON CONFLICT (name) DO UPDATE SET spec = excluded.spec, placement_owned = excluded.placement_owned,
         max_fires = excluded.max_fires, state = excluded.state, due_ms = excluded.due_ms`,
    );
    for (const s of a.records) put.run(s.name, s.spec, s.placementOwned ? 1 : 0, BigInt(s.maxFires), s.state, copiedDueKey(s) ?? null);
  }),
  "schedule.copy.fireIds": idsOp(`SELECT fire_id FROM schedule_fires`),
  "schedule.copy.fireRead": readOp((db, a: { requests: CopyReadRequest[] }) => {
    const get = copyStatement<[string], { schedule_name: string; payload: string }>(db, `SELECT schedule_name, payload FROM schedule_fires WHERE fire_id = ?`);
    return wholeRecords(a.requests, (fireId): FireCopy | undefined => {
      const row = get.get(fireId);
      return row === undefined ? undefined : { fireId, scheduleName: row.schedule_name, payload: row.payload };
    });
  }),
  "schedule.copy.fireWrite": writeOp((db, a: { records: FireCopy[] }) => {
    const put = copyStatement(db, 
      `INSERT INTO schedule_fires (fire_id, schedule_name, payload) VALUES (?, ?, ?)
       ON CONFLICT (fire_id) DO UPDATE SET schedule_name = excluded.schedule_name, payload = excluded.payload`,
    );
    for (const f of a.records) put.run(f.fireId, f.scheduleName, f.payload);
  }),
  "schedule.copy.erase": writeOp((db, _a: Record<string, never>) => {
    db.exec(`DELETE FROM schedules; DELETE FROM schedule_fires;`);
  }),
};
