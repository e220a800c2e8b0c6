import type { SqliteDatabase } from "../storage/sqlite-database.js";
import type { AcquireResult, ReleaseResult, RenewResult } from "./rules.js";
import type { SessionLeaseStore } from "./store.js";

/**
 * SessionLeaseStore on SQLite: each call is one write operation on the
 * SQLite worker (sqlite-ops.ts) that applies a rule of rules.ts inside the
 * worker's immediate transaction, at the local wall clock, and answers after
 * the group commit is fsynced. Two server processes on one file serialise on
 * SQLite's write lock, so the rule is atomic across them too.
 */
export class SqliteSessionLeaseStore implements SessionLeaseStore {
  /** @param ttlUs lease lifetime in microseconds. */
  constructor(
    private readonly db: SqliteDatabase,
    private readonly ttlUs: bigint,
  ) {}

  acquire(sessionId: string, owner: string): Promise<AcquireResult> {
    return this.db.call("lease.acquire", { sessionId, owner, ttlUs: this.ttlUs });
  }

  renew(sessionId: string, owner: string, token: bigint): Promise<RenewResult> {
    return this.db.call("lease.renew", { sessionId, owner, token, ttlUs: this.ttlUs });
  }

  release(sessionId: string, owner: string, token: bigint): Promise<ReleaseResult> {
    return this.db.call("lease.release", { sessionId, owner, token, ttlUs: this.ttlUs });
  }
}
