/**
 * The SQLite worker thread: owns the only connection to the database file and
 * runs named operations posted by the main thread (see sqlite-database.ts).
 *
 * Group commit: every write request that is waiting when the worker becomes
 * free goes into one `BEGIN IMMEDIATE` transaction, each under its own
 * savepoint so one failing operation rolls back alone; all of them are
 * answered after the single COMMIT (and its fsync) returns. Reads are answered
 * at once. Because the connection lives here, a 64 MiB snapshot write never
 * blocks the main thread's event loop (DESIGN.md "Backends").
 */
import { parentPort, workerData, receiveMessageOnPort, type MessagePort } from "node:worker_threads";
import Database from "better-sqlite3";
import { sqliteOps, sqliteMigrations } from "./sqlite-registry.js";
import type { OpContext } from "./sqlite-op.js";
import { applyPragmas, migrate } from "./sqlite-schema.js";

interface Request {
  id: number;
  op: string;
  args: unknown;
}

interface WorkerInit {
  path: string;
  port: MessagePort;
  busyTimeoutMs: number;
  durable: boolean;
  /** Open an existing file read-only: no pragmas that write, no migrations (store measurements, `stats`). */
  readonly: boolean;
}

const init = workerData as WorkerInit;
const port = init.port;
const ops = sqliteOps as Record<string, { kind: "read" | "write"; run: (db: Database.Database, args: unknown, ctx: OpContext) => unknown }>;

let db: Database.Database;
try {
  if (init.readonly) {
    db = new Database(init.path, { readonly: true, fileMustExist: true });
    db.pragma(`busy_timeout = ${Math.trunc(init.busyTimeoutMs)}`);
  } else {
    db = new Database(init.path);
    applyPragmas(db, { busyTimeoutMs: init.busyTimeoutMs, durable: init.durable });
    migrate(db, sqliteMigrations);
  }
  parentPort!.postMessage({ type: "ready" });
} catch (err) {
  parentPort!.postMessage({ type: "failed", message: (err as Error).message });
  process.exit(1);
}

const queue: Request[] = [];
let scheduled = false;
let closing = false;

type Message = { type: "batch"; requests: Request[] } | { type: "close" };

function accept(msg: Message): void {
  if (msg.type === "close") closing = true;
  else queue.push(...msg.requests);
}

port.on("message", (msg: Message) => {
  accept(msg);
  if (!scheduled) {
    scheduled = true;
    setImmediate(drain);
  }
});

function errorReply(id: number, err: unknown) {
  const e = err as { message?: string; code?: string };
  return { id, ok: false as const, message: e?.message ?? String(err), sqliteCode: e?.code };
}

function drain(): void {
  scheduled = false;
  for (let m = receiveMessageOnPort(port); m !== undefined; m = receiveMessageOnPort(port)) accept(m.message as Message);
  const batch = queue.splice(0);
  const replies: unknown[] = [];
  const notifications: Array<{ topic: string; data: unknown }> = [];
  const writes = batch.filter((r) => ops[r.op]?.kind === "write");
  for (const r of batch) {
    const op = ops[r.op];
    if (op === undefined) replies.push(errorReply(r.id, new Error(`unknown SQLite operation ${r.op}`)));
    else if (op.kind === "read") {
      try {
        replies.push({ id: r.id, ok: true, value: op.run(db, r.args, { notify: () => undefined }) });
      } catch (err) {
        replies.push(errorReply(r.id, err));
      }
    }
  }
  if (writes.length > 0) replies.push(...runWrites(writes, notifications));
  // `writes`: how many writes this group commit carried (0 when the batch held only reads), for the batch-size metric.
  port.postMessage({ type: "replies", replies, notifications, writes: writes.length });
  if (closing && queue.length === 0) {
    db.close();
    port.postMessage({ type: "closed" });
    port.close();
  }
}

/** Runs a batch of writes in one transaction; answers only after COMMIT. */
function runWrites(writes: Request[], notifications: Array<{ topic: string; data: unknown }>): unknown[] {
  const replies: unknown[] = [];
  const pending: Array<{ topic: string; data: unknown }> = [];
  try {
    db.exec("BEGIN IMMEDIATE");
  } catch (err) {
    return writes.map((w) => errorReply(w.id, err));
  }
  for (const w of writes) {
    const mine: Array<{ topic: string; data: unknown }> = [];
    db.exec("SAVEPOINT op");
    try {
      const value = ops[w.op]!.run(db, w.args, { notify: (topic, data) => mine.push({ topic, data }) });
      db.exec("RELEASE op");
      replies.push({ id: w.id, ok: true, value });
      pending.push(...mine);
    } catch (err) {
      db.exec("ROLLBACK TO op");
      db.exec("RELEASE op");
      replies.push(errorReply(w.id, err));
    }
  }
  try {
    db.exec("COMMIT");
  } catch (err) {
    try {
      db.exec("ROLLBACK");
    } catch {
      // the transaction is already gone
    }
    return writes.map((w) => errorReply(w.id, err));
  }
  notifications.push(...pending);
  return replies;
}
