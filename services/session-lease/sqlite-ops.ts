import type Database from "better-sqlite3";
import { writeOp, type Migration } from "../storage/sqlite-op.js";
import { decideAcquire, decideRelease, decideRenew, type LeaseDecision, type LeaseSlot } from "./rules.js";

/**
 * Schema of the session lease on SQLite: one row per session id ever leased.
 * `owner`, `token` and `expiry_us` describe the current hold and are NULL
 * together when the id is free; `high_water` is the highest token ever
 * granted and is never cleared, so tokens stay monotone across Release and
 * restarts (wire-contract.md section 4.3). Tokens are uint64 stored in a
 * signed 64-bit INTEGER by their bit pattern (values above 2^63 - 1 read back
 * negative in the sqlite3 shell; this code converts both ways exactly).
 */
export const sessionLeaseMigrations: readonly Migration[] = [
  {
    component: "session-lease",
    version: 1,
    sql: `CREATE TABLE session_leases (
            session_id TEXT    NOT NULL PRIMARY KEY,
            owner      TEXT,
            token      INTEGER,
            expiry_us  INTEGER,
            high_water INTEGER NOT NULL
          ) STRICT;`,
  },
];

interface SlotRow {
  owner: string | null;
  token: bigint | null;
  expiry_us: bigint | null;
  high_water: bigint;
}

interface LeaseStatements {
  read: Database.Statement<[string], SlotRow>;
  write: Database.Statement<[string, string | null, bigint | null, bigint | null, bigint]>;
}

const statementCache = new WeakMap<Database.Database, LeaseStatements>();

function statements(db: Database.Database): LeaseStatements {
  let s = statementCache.get(db);
  if (s === undefined) {
    s = {
      read: db.prepare<[string], SlotRow>(`SELECT owner, token, expiry_us, high_water FROM session_leases WHERE session_id = ?`).safeIntegers(true),
      write: db.prepare(
        `INSERT INTO session_leases (session_id, owner, token, expiry_us, high_water) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (session_id) DO UPDATE SET owner = excluded.owner, token = excluded.token,
           expiry_us = excluded.expiry_us, high_water = excluded.high_water`,
      ),
    };
    statementCache.set(db, s);
  }
  return s;
}

const toStored = (token: bigint) => BigInt.asIntN(64, token);
const fromStored = (stored: bigint) => BigInt.asUintN(64, stored);

function readSlot(db: Database.Database, sessionId: string): LeaseSlot {
  const row = statements(db).read.get(sessionId);
  if (row === undefined) return { hold: undefined, highWater: 0n };
  const hold = row.owner === null ? undefined : { owner: row.owner, token: fromStored(row.token!), expiryUs: row.expiry_us! };
  return { hold, highWater: fromStored(row.high_water) };
}

function writeSlot(db: Database.Database, sessionId: string, slot: LeaseSlot): void {
  const h = slot.hold;
  statements(db).write.run(sessionId, h?.owner ?? null, h === undefined ? null : toStored(h.token), h?.expiryUs ?? null, toStored(slot.highWater));
}

/** The local wall clock in microseconds since the epoch (millisecond resolution). */
function nowMicros(): bigint {
  return BigInt(Date.now()) * 1000n;
}

/**
 * Reads the slot, lets `decide` judge it at the current time, and stores the
 * slot it returns; all inside the calling write operation, i.e. inside the
 * worker's immediate transaction, so no other writer (in this or another
 * process) can interleave. Returns the caller's result.
 */
function applyRule<R>(db: Database.Database, sessionId: string, decide: (slot: LeaseSlot, nowUs: bigint) => LeaseDecision<R>): R {
  const decision = decide(readSlot(db, sessionId), nowMicros());
  if (decision.next !== undefined) writeSlot(db, sessionId, decision.next);
  return decision.result;
}

/** Arguments of Acquire on the worker; `ttlUs` is the server's TTL in microseconds. */
interface AcquireArgs {
  sessionId: string;
  owner: string;
  ttlUs: bigint;
}

/** Arguments of Renew and Release on the worker (Release ignores `ttlUs`). */
interface HoldArgs extends AcquireArgs {
  token: bigint;
}

/**
 * The session lease's operations on the SQLite worker (wire-contract.md
 * section 4.3), each one rule of rules.ts applied by {@link applyRule}.
 */
export const sessionLeaseOps = {
  "lease.acquire": writeOp((db, a: AcquireArgs) => applyRule(db, a.sessionId, (slot, nowUs) => decideAcquire(slot, a.owner, { nowUs, ttlUs: a.ttlUs }))),
  "lease.renew": writeOp((db, a: HoldArgs) => applyRule(db, a.sessionId, (slot, nowUs) => decideRenew(slot, a.owner, a.token, { nowUs, ttlUs: a.ttlUs }))),
  "lease.release": writeOp((db, a: HoldArgs) => applyRule(db, a.sessionId, (slot) => decideRelease(slot, a.owner, a.token))),
};
