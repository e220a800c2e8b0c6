import { readOp, writeOp } from "../storage/sqlite-op.js";
import { copyStatement, idsOp } from "../storage/copy/sqlite-copy-op.js";
import { wholeRecords, type CopyReadRequest } from "../storage/copy/kind-store.js";
import type { LeaseCopy } from "./copy-format.js";

interface LeaseRow {
  owner: string | null;
  token: bigint | null;
  expiry_us: bigint | null;
  high_water: bigint;
}

/** A stored token (signed 64-bit by bit pattern, sqlite-ops.ts) as unsigned decimal, and back. */
const fromStored = (stored: bigint) => BigInt.asUintN(64, stored).toString();
const toStored = (token: string) => BigInt.asIntN(64, BigInt(token));

/**
 * The session lease's copy operations on the SQLite worker (issue 14; see
 * services/storage/copy/kind-store.ts): `lease.copy.ids`, `lease.copy.read`
 * {requests} → {@link LeaseCopy} per session id, `lease.copy.write` {records}
 * (hold and high-water mark as given), `lease.copy.erase`.
 */
export const leaseCopyOps = {
  "lease.copy.ids": idsOp(`SELECT session_id FROM session_leases`),
  "lease.copy.read": readOp((db, a: { requests: CopyReadRequest[] }) => {
    const get = copyStatement<[string], LeaseRow>(db, `SELECT owner, token, expiry_us, high_water FROM session_leases WHERE session_id = ?`).safeIntegers(true);
    return wholeRecords(a.requests, (sessionId): LeaseCopy | undefined => {
      const row = get.get(sessionId);
      if (row === undefined) return undefined;
      const hold = row.owner === null ? undefined : { owner: row.owner, token: fromStored(row.token!), expiryUs: row.expiry_us!.toString() };
      return { sessionId, hold, highWater: fromStored(row.high_water) };
    });
  }),
  "lease.copy.write": writeOp((db, a: { records: LeaseCopy[] }) => {
    const put = copyStatement(db, 
      `INSERT INTO session_leases (session_id, owner, token, expiry_us, high_water) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (session_id) DO UPDATE SET owner = excluded.owner, token = excluded.token, expiry_us = excluded.expiry_us, high_water = excluded.high_water`,
    );
    for (const l of a.records) {
      const h = l.hold;
      put.run(l.sessionId, h?.owner ?? null, h === undefined ? null : toStored(h.token), h === undefined ? null : BigInt(h.expiryUs), toStored(l.highWater));
    }
  }),
  "lease.copy.erase": writeOp((db, _a: Record<string, never>) => {
    db.exec(`DELETE FROM session_leases`);
  }),
};
