import type Database from "better-sqlite3";
import { SCAN_PAGE_ENTRIES, takePage, type Page } from "../storage/index-scan.js";
import { fitting, inlineReadOp, readOp, UNLIMITED_READ_BYTES, writeOp, type Migration } from "../storage/sqlite-op.js";
import { statement } from "../storage/sqlite-statement.js";
import { applyMutation, dueIndexKey, dueIndexKeyAt, isDue, mutationTargets, type MutationReply, type ScheduleMutation } from "./rules.js";
import { decodeState, encodeState, parseFire, type FireDocument, type ScheduleDocument } from "./schedule.js";

/**
 * Schema of the schedule store on SQLite (wire-contract.md section 5).
 *
 * `schedules`: one row per schedule; `spec` is the Spec text as received,
 * `state` the State as encoded by schedule.ts, `max_fires` and
 * `placement_owned` the Spec facts the rules read. `due_ms` is the Due index
 * key (rules.ts `dueIndexKey`: NextFireAt in whole milliseconds, NULL when
 * the schedule cannot be due), indexed partially so DueSchedules reads only
 * the candidate rows.
 *
 * `schedule_fires`: one row per fire id, `payload` the record text as
 * received (or with ProgressAt advanced); indexed by `schedule_name` (the
 * record's ScheduleName) for ListFires.
 */
export const scheduleStoreMigrations: readonly Migration[] = [
  {
    component: "schedule-store",
    version: 1,
    sql: `CREATE TABLE schedules (
            name            TEXT    NOT NULL PRIMARY KEY,
            spec            TEXT    NOT NULL,
            placement_owned INTEGER NOT NULL,
            max_fires       INTEGER NOT NULL,
            state           TEXT    NOT NULL,
            due_ms          INTEGER
          ) STRICT;
          CREATE INDEX schedules_due ON schedules (due_ms) WHERE due_ms IS NOT NULL;
          CREATE TABLE schedule_fires (
            fire_id       TEXT NOT NULL PRIMARY KEY,
            schedule_name TEXT NOT NULL,
            payload       TEXT NOT NULL
          ) STRICT;
          CREATE INDEX schedule_fires_by_schedule ON schedule_fires (schedule_name);`,
  },
];

/** A prepared statement, cached per connection (storage/sqlite-statement.ts), returning integers as bigints. */
function stmt(db: Database.Database, sql: string): Database.Statement {
  const s = statement(db, sql);
  return s.reader ? s.safeIntegers(true) : s;
}

interface ScheduleRow {
  name: string;
  spec: string;
  placement_owned: bigint;
  max_fires: bigint;
  state: string;
}

const COLUMNS = "name, spec, placement_owned, max_fires, state";

/** Position in the Due index: the row's `due_ms` and its rowid (stable across updates of the row). */
export interface DueKey {
  dueMs: bigint;
  rowid: bigint;
}

interface DueRow extends ScheduleRow {
  rowid: bigint;
  due_ms: bigint;
}

interface FireRow {
  rowid: bigint;
  payload: string;
}

/** Characters a schedule row holds, to end a page early (index-scan.ts `takePage`). */
function rowBytes(r: ScheduleRow): number {
  return r.spec.length + r.state.length;
}

function toDocument(row: ScheduleRow): ScheduleDocument {
  return { name: row.name, specText: row.spec, placementOwned: row.placement_owned === 1n, maxFires: row.max_fires, state: decodeState(row.state) };
}

/** The schedule, loading it only when its Spec and State hold at most `readBytes` bytes (see sqlite-op.ts `fitting`). */
function readSchedule(db: Database.Database, name: string, readBytes = UNLIMITED_READ_BYTES): ScheduleDocument | undefined {
  const row = fitting(
    stmt(db, `SELECT ${COLUMNS} FROM schedules WHERE name = ? AND octet_length(spec) + octet_length(state) <= ?`).get(name, readBytes) as ScheduleRow | undefined,
    () => scheduleExists(db, name),
  );
  return row === undefined ? undefined : toDocument(row);
}

function scheduleExists(db: Database.Database, name: string): boolean {
  return stmt(db, `SELECT 1 FROM schedules WHERE name = ?`).get(name) !== undefined;
}

/** A fire record's text, loading it only when it holds at most `readBytes` bytes. */
function readFireText(db: Database.Database, fireId: string, readBytes = UNLIMITED_READ_BYTES): string | undefined {
  const row = fitting(
    stmt(db, `SELECT payload FROM schedule_fires WHERE fire_id = ? AND octet_length(payload) <= ?`).get(fireId, readBytes) as { payload: string } | undefined,
    () => stmt(db, `SELECT 1 FROM schedule_fires WHERE fire_id = ?`).get(fireId) !== undefined,
  );
  return row?.payload;
}

function readFire(db: Database.Database, fireId: string): FireDocument | undefined {
  const text = readFireText(db, fireId);
  return text === undefined ? undefined : parseFire(text);
}

function writeSchedule(db: Database.Database, s: ScheduleDocument): void {
  stmt(
    db,
    `INSERT INTO schedules (name, spec, placement_owned, max_fires, state, due_ms) VALUES (?, ?, ?, ?, ?, ?)
     ON CONFLICT (name) DO UPDATE SET spec = excluded.spec, placement_owned = excluded.placement_owned,
       max_fires = excluded.max_fires, state = excluded.state, due_ms = excluded.due_ms`,
  ).run(s.name, s.specText, s.placementOwned ? 1 : 0, s.maxFires, encodeState(s.state), dueIndexKey(s) ?? null);
}

function writeFire(db: Database.Database, f: FireDocument): void {
  stmt(
    db,
    `INSERT INTO schedule_fires (fire_id, schedule_name, payload) VALUES (?, ?, ?)
     ON CONFLICT (fire_id) DO UPDATE SET schedule_name = excluded.schedule_name, payload = excluded.payload`,
  ).run(f.id, f.scheduleName, f.text);
}

/** The schedule store's operations on the SQLite worker (wire-contract.md section 5.5). */
export const scheduleStoreOps = {
  /**
   * Reads the targeted schedule and fire, applies the rule, and writes the
   * result, all inside the worker's write transaction: atomic and durable
   * before the reply.
   */
  "schedule.mutate": writeOp((db, m: ScheduleMutation): MutationReply => {
    const { scheduleName, fireId } = mutationTargets(m);
    const t = applyMutation(m, readSchedule(db, scheduleName), fireId === undefined ? undefined : readFire(db, fireId));
    if (t.schedule === null) stmt(db, `DELETE FROM schedules WHERE name = ?`).run(scheduleName);
    else if (t.schedule !== undefined) writeSchedule(db, t.schedule);
    if (t.fire !== undefined) writeFire(db, t.fire);
    return t.reply;
  }),
  /** Inline (on the main thread) unless the schedule holds more than 1 MiB. */
  "schedule.load": inlineReadOp((db, a: { name: string }, ctx) => readSchedule(db, a.name, ctx.readBytes)),
  /** One page of ListSchedules: schedules in name byte order strictly after `after` (keyset over the primary key). */
  "schedule.listPage": readOp((db, a: { after: string | undefined }): Page<ScheduleDocument, string> => {
    const rows =
      a.after === undefined
        ? stmt(db, `SELECT ${COLUMNS} FROM schedules ORDER BY name LIMIT ?`).iterate(SCAN_PAGE_ENTRIES)
        : stmt(db, `SELECT ${COLUMNS} FROM schedules WHERE name > ? ORDER BY name LIMIT ?`).iterate(a.after, SCAN_PAGE_ENTRIES);
    return takePage(rows as Iterable<ScheduleRow>, toDocument, rowBytes, (r) => r.name);
  }),
  "schedule.count": readOp((db, _a: Record<string, never>): number => Number((stmt(db, `SELECT count(*) AS n FROM schedules`).get() as { n: bigint }).n)),
  /**
   * One page of DueSchedules: candidates through the partial index on
   * `due_ms` in (due_ms, rowid) order strictly after `after`, up to `now`,
   * then the exact nanosecond check (the page's key is its last candidate's,
   * due or not).
   */
  "schedule.duePage": readOp((db, a: { now: bigint; after: DueKey | undefined }): Page<ScheduleDocument, DueKey> => {
    const max = dueIndexKeyAt(a.now);
    const rows =
      a.after === undefined
        ? stmt(db, `SELECT rowid, ${COLUMNS}, due_ms FROM schedules WHERE due_ms <= ? ORDER BY due_ms, rowid LIMIT ?`).iterate(max, SCAN_PAGE_ENTRIES)
        : stmt(db, `SELECT rowid, ${COLUMNS}, due_ms FROM schedules WHERE due_ms <= ? AND (due_ms, rowid) > (?, ?) ORDER BY due_ms, rowid LIMIT ?`).iterate(
            max,
            a.after.dueMs,
            a.after.rowid,
            SCAN_PAGE_ENTRIES,
          );
    const page = takePage(rows as Iterable<DueRow>, toDocument, rowBytes, (r): DueKey => ({ dueMs: r.due_ms, rowid: r.rowid }));
    return { ...page, entries: page.entries.filter((s) => isDue(s, a.now)) };
  }),
  /** Inline unless the record holds more than 1 MiB. */
  "schedule.loadFire": inlineReadOp((db, a: { fireId: string }, ctx): string | undefined => readFireText(db, a.fireId, ctx.readBytes)),
  "schedule.exists": inlineReadOp((db, a: { name: string }): boolean => scheduleExists(db, a.name)),
  /** One page of ListFires: the schedule's fire records in rowid order strictly after `after`, through the index on `schedule_name`. */
  "schedule.firesPage": readOp((db, a: { scheduleName: string; after: bigint | undefined }): Page<string, bigint> => {
    const rows = stmt(db, `SELECT rowid, payload FROM schedule_fires WHERE schedule_name = ? AND rowid > ? ORDER BY rowid LIMIT ?`).iterate(a.scheduleName, a.after ?? 0n, SCAN_PAGE_ENTRIES);
    return takePage(rows as Iterable<FireRow>, (r) => r.payload, (r) => r.payload.length, (r) => r.rowid);
  }),
  "schedule.countFires": readOp((db, a: { scheduleName: string }): number =>
    Number((stmt(db, `SELECT count(*) AS n FROM schedule_fires WHERE schedule_name = ?`).get(a.scheduleName) as { n: bigint }).n),
  ),
};
