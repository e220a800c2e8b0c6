/**
 * An SQLite worker thread: owns one connection to the database file and runs
 * named operations posted by the main thread (see sqlite-database.ts). A
 * server runs two: the writer, with the only connection that writes, and a
 * reader with a read-only connection for the reads that are not point reads
 * (pages, counts, large snapshots), so that no read waits behind a group
 * commit and no write behind a large read (issue 11).
 *
 * Group commit: the write requests waiting when the worker becomes free (up
 * to an adaptive limit, group-commit-limit.ts) go into one `BEGIN IMMEDIATE`
 * transaction, each under its own
 * savepoint so one failing operation rolls back alone; all of them are
 * answered after the single COMMIT (and its fsync) returns. Reads are answered
 * at once. A request still queued when its deadline (`--store-timeout`) has
 * passed, or a write the main thread cancelled at its deadline
 * (sqlite-write-claims.ts), is dropped unstarted. Errors cross to the main thread as SQLite's
 * message plus its extended code (`sqliteCode`), which sqlite-failure.ts
 * classifies. Because the connection lives here, a 64 MiB snapshot write never
 * blocks the main thread's event loop (docs/DESIGN.md "Backends"). Each `replies`
 * message also reports its group commit, if there was one (`commit`: start
 * and end in epoch milliseconds, number of writes), for tracing and the
 * group-commit size metric (issue 14). Large byte arrays in the replies are
 * moved to the main thread, not copied (sqlite-transfer.ts).
 */
import { parentPort, workerData, receiveMessageOnPort, type MessagePort } from "node:worker_threads";
import Database from "better-sqlite3";
import { sqliteOps, sqliteMigrations, sqliteStartupTasks } from "./sqlite-registry.js";
import { UNLIMITED_READ_BYTES, type OpContext } from "./sqlite-op.js";
import { transferables } from "./sqlite-transfer.js";
import { sharedMemoryReleaser } from "./shared-memory-release.js";
import { applyPragmas, migrate, readDurabilitySettings, rollbackIfOpen } from "./sqlite-schema.js";
import { probeWrite, storageMigrations } from "./sqlite-probe.js";
import { FALLBACK_CHECKPOINT_PAGES } from "./sqlite-checkpoint.js";
import { EXPIRED_CODE } from "./sqlite-failure.js";
import { GroupCommitLimit } from "./group-commit-limit.js";
import { WriteClaims } from "./sqlite-write-claims.js";
import { openReadOnly } from "./sqlite-readonly.js";
import { prepareSpace, SqliteMaintenance, type SqliteSpaceSettings } from "./sqlite-maintenance.js";
import type { GroupCommitReport } from "../tracing/group-commit-span.js";

interface Request {
  id: number;
  op: string;
  args: unknown;
  /** Epoch milliseconds after which the caller has given up (`--store-timeout`); an unstarted request is then dropped. */
  deadline: number;
  /** A write's slot in {@link claims}; -1 for a read or an untracked write. */
  slot: number;
}

interface WorkerInit {
  path: string;
  port: MessagePort;
  busyTimeoutMs: number;
  durable: boolean;
  /** Open an existing file read-only: no pragmas that write, no migrations (store measurements, `stats`). */
  readonly: boolean;
  /** With `readonly`: see {@link openReadOnly}'s `queryOnly`. */
  queryOnly?: boolean;
  /**
   * The reader worker of a read-write file (with `readonly` and
   * `queryOnly`): also runs the WAL checkpoints the main thread asks for
   * (sqlite-checkpoint.ts).
   */
  checkpoints?: boolean;
  /** The writer: the shared table in which the main thread cancels writes not yet started (sqlite-write-claims.ts). */
  claims?: SharedArrayBuffer;
}

const init = workerData as WorkerInit;
const claims = init.claims === undefined ? undefined : new WriteClaims(init.claims);
const port = init.port;
const ops = sqliteOps as Record<string, { kind: "read" | "write"; large?: boolean; run: (db: Database.Database, args: unknown, ctx: OpContext) => unknown }>;

let db: Database.Database;
/** Space reclamation (sqlite-maintenance.ts), for a read-write file only. */
let space: SqliteSpaceSettings | undefined;
try {
  if (init.readonly) {
    db = openReadOnly(init.path, init.queryOnly ?? false);
    db.pragma(`busy_timeout = ${Math.trunc(init.busyTimeoutMs)}`);
    // A checkpoint syncs the WAL before copying and the file after, at NORMAL and FULL alike; FULL says so plainly.
    if (init.checkpoints === true) db.pragma("synchronous = FULL");
  } else {
    db = new Database(init.path);
    applyPragmas(db, { busyTimeoutMs: init.busyTimeoutMs, durable: init.durable });
    if (!db.memory) {
      space = prepareSpace(db);
      // The reader worker checkpoints (sqlite-checkpoint.ts); the writer only when that falls far behind.
      db.pragma(`wal_autocheckpoint = ${FALLBACK_CHECKPOINT_PAGES}`);
    }
    migrate(db, [...sqliteMigrations, ...storageMigrations]);
    for (const task of sqliteStartupTasks) db.transaction(() => task(db)).immediate();
  }
  parentPort!.postMessage({ type: "ready", settings: { ...readDurabilitySettings(db), ...space } });
} catch (err) {
  parentPort!.postMessage({ type: "failed", message: (err as Error).message });
  process.exit(1);
}

const queue: Request[] = [];
let scheduled = false;
const maintenance = space === undefined ? undefined : new SqliteMaintenance(db, () => scheduled || queue.length > 0);
maintenance?.afterStart();
let closing = false;
let probeWanted = false;
let checkpointWanted = false;

type Message = { type: "batch"; requests: Request[] } | { type: "close" } | { type: "probe" } | { type: "checkpoint" };

function accept(msg: Message): void {
  if (msg.type === "close") closing = true;
  else if (msg.type === "probe") probeWanted = true;
  else if (msg.type === "checkpoint") checkpointWanted = true;
  else queue.push(...msg.requests);
}

/** How many queued requests one drain takes (group-commit-limit.ts). */
const groupLimit = new GroupCommitLimit();

/** Batches answered so far: the writer's full collection waits for a moment without any (shared-memory-release.ts). */
let batches = 0;
const releaseSharedMemory = sharedMemoryReleaser({ activity: () => batches });

/** Runs {@link drain} at the next turn of the event loop, unless it is due already. */
function schedule(): void {
  if (!scheduled) {
    scheduled = true;
    setImmediate(drain);
  }
}

port.on("message", (msg: Message) => {
  accept(msg);
  schedule();
});

/** The group commit of the batch being answered, if it had writes (see tracing/group-commit-span.ts). */
let commit: GroupCommitReport | undefined;

/** Wall-clock time in epoch milliseconds with sub-millisecond precision (comparable across threads, unlike `performance.now()`). */
function epochMs(): number {
  return performance.timeOrigin + performance.now();
}

type Reply = { id: number; ok: true; value: unknown } | { id: number; ok: false; message: string; sqliteCode: string | undefined };
type Notification = { topic: string; data: unknown };

function errorReply(id: number, err: unknown): Reply {
  const e = err as { message?: string; code?: string };
  return { id, ok: false, message: e?.message ?? String(err), sqliteCode: e?.code };
}

/** The reply for a request whose caller gave up before it started (queued, or waiting for the write lock): nothing of it ran. */
function expiredReply(id: number): Reply {
  return { id, ok: false, message: "dropped unstarted: its deadline passed while it was queued", sqliteCode: EXPIRED_CODE };
}

/**
 * Answers the oldest queued requests, as many as {@link groupLimit} allows
 * (the rest in the next drain, one event-loop turn later), in two parts: the reads and small writes
 * first, then the large writes (staged chunks; issue 11), each part with its
 * own group commit and its own reply message, so that a small write never
 * waits for a large one's insert (see SqliteOp.large). Never throws: an
 * error no operation expected (say, SQLite rolled a transaction back under
 * us) is answered to every request of its part, and the worker goes on
 * serving.
 */
function drain(): void {
  scheduled = false;
  for (let m = receiveMessageOnPort(port); m !== undefined; m = receiveMessageOnPort(port)) accept(m.message as Message);
  const batch = queue.splice(0, groupLimit.size);
  if (batch.length > 0) batches++;
  const large = batch.filter((r) => ops[r.op]?.large === true);
  let writes = 0;
  for (const part of [large.length === 0 ? batch : batch.filter((r) => ops[r.op]?.large !== true), large]) {
    if (part.length > 0) writes += answer(part);
  }
  maintenance?.afterDrain(writes);
  // Staged chunks may be views of a request's shared memory: let it go once they are written.
  if (large.length > 0) releaseSharedMemory();
  if (probeWanted) {
    probeWanted = false;
    port.postMessage({ type: "probe", result: probeWrite(db, init.path) });
  }
  if (checkpointWanted) {
    checkpointWanted = false;
    port.postMessage({ type: "checkpointed", ok: checkpoint() });
  }
  // Requests beyond the limit wait for the next drain. What arrived meanwhile is still in the port: its message
  // events schedule a drain of their own (taking it in here would leave a checkpoint or probe asked for unattended).
  groupLimit.adapt(queue.length);
  if (queue.length > 0) schedule();
  if (closing && queue.length === 0) {
    maintenance?.stop();
    db.close();
    port.postMessage({ type: "closed" });
    port.close();
  }
}

/**
 * One passive checkpoint (sqlite-checkpoint.ts): copies what it can of the
 * WAL into the database file without waiting for any lock. Answers false
 * when it failed (the disk is full, say); the writer's own automatic
 * checkpoint remains as a backstop.
 */
function checkpoint(): boolean {
  try {
    db.pragma("wal_checkpoint(PASSIVE)");
    return true;
  } catch {
    return false;
  }
}

/** Runs one part of a batch and posts its replies; returns the number of writes its group commit carried. */
function answer(part: Request[]): number {
  commit = undefined;
  const notifications: Notification[] = [];
  let replies: Reply[];
  try {
    replies = runBatch(part, notifications);
  } catch (err) {
    rollbackIfOpen(db);
    replies = part.map((r) => errorReply(r.id, err));
    notifications.length = 0;
  }
  try {
    port.postMessage({ type: "replies", replies, notifications, commit }, transferables(replies));
  } finally {
    if (claims !== undefined) for (const r of part) claims.release(r.id, r.slot);
  }
  // runBatch set `commit` when the part had writes (control-flow analysis cannot see that).
  return (commit as GroupCommitReport | undefined)?.size ?? 0;
}

/** Answers the reads at once and runs the writes as one group commit. */
function runBatch(batch: Request[], notifications: Notification[]): Reply[] {
  const replies: Reply[] = [];
  const writes: Request[] = [];
  for (const r of batch) {
    const op = ops[r.op];
    if (op === undefined) replies.push(errorReply(r.id, new Error(`unknown SQLite operation ${r.op}`)));
    else if (op.kind === "write") writes.push(r);
    else if (Date.now() > r.deadline) replies.push(expiredReply(r.id));
    else {
      try {
        replies.push({ id: r.id, ok: true, value: op.run(db, r.args, { notify: () => undefined, readBytes: UNLIMITED_READ_BYTES }) });
      } catch (err) {
        replies.push(errorReply(r.id, err));
      }
    }
  }
  if (writes.length > 0) replies.push(...runWrites(writes, notifications));
  return replies;
}

/**
 * Runs a batch of writes in one transaction, each under its own savepoint;
 * answers only after COMMIT. When the transaction as a whole fails (BEGIN,
 * COMMIT, or an error after which SQLite rolled everything back, such as
 * SQLITE_FULL or SQLITE_IOERR), every write of the group gets that error and
 * none of them is left in the database.
 */
function runWrites(writes: Request[], notifications: Notification[]): Reply[] {
  const expired: Reply[] = [];
  const live: Request[] = [];
  const now = Date.now();
  for (const w of writes) {
    if (now > w.deadline) expired.push(expiredReply(w.id));
    else live.push(w);
  }
  if (live.length === 0) return expired;
  const startMs = epochMs();
  const { replies, started } = commitGroup(live, expired, notifications);
  // Writes skipped inside the transaction (their deadline passed, or cancelled) are not counted; a group of none is no commit.
  if (started > 0) commit = { startMs, endMs: epochMs(), size: started };
  return replies;
}

/**
 * The transaction of {@link runWrites}: `live` writes under one BEGIN
 * IMMEDIATE ... COMMIT; `expired` replies go first. `started`: the writes
 * the group carried (all of `live` when the group failed as a whole).
 */
function commitGroup(live: Request[], expired: Reply[], notifications: Notification[]): { replies: Reply[]; started: number } {
  const failAll = (err: unknown) => {
    rollbackIfOpen(db);
    return { replies: [...expired, ...live.map((w) => errorReply(w.id, err))], started: live.length };
  };
  try {
    db.exec("BEGIN IMMEDIATE");
  } catch (err) {
    return failAll(err);
  }
  const replies: Reply[] = [...expired];
  const pending: Notification[] = [];
  let started = 0;
  for (const w of live) {
    // BEGIN IMMEDIATE may have waited for another process's lock: a write whose
    // deadline passed meanwhile, or that the main thread cancelled, is not applied late.
    if (Date.now() > w.deadline || claims?.start(w.id, w.slot) === false) {
      replies.push(expiredReply(w.id));
      continue;
    }
    started++;
    const mine: Notification[] = [];
    db.exec("SAVEPOINT op");
    try {
      const value = ops[w.op]!.run(db, w.args, { notify: (topic, data) => mine.push({ topic, data }), readBytes: UNLIMITED_READ_BYTES });
      db.exec("RELEASE op");
      replies.push({ id: w.id, ok: true, value });
      pending.push(...mine);
    } catch (err) {
      // SQLite may have rolled the whole transaction back (SQLITE_FULL, SQLITE_IOERR, ...): the group is lost.
      if (!db.inTransaction) return failAll(err);
      try {
        db.exec("ROLLBACK TO op");
        db.exec("RELEASE op");
      } catch {
        return failAll(err);
      }
      replies.push(errorReply(w.id, err));
    }
  }
  try {
    db.exec("COMMIT");
  } catch (err) {
    return failAll(err);
  }
  notifications.push(...pending);
  return { replies, started };
}
