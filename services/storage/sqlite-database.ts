import { Worker, MessageChannel, type MessagePort } from "node:worker_threads";
import { EventEmitter } from "node:events";
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import Database from "better-sqlite3";
import { sqliteOps, type SqliteOps } from "./sqlite-registry.js";
import { INLINE_READ_BYTES, NeedsWorker, type OpContext, type SqliteOp } from "./sqlite-op.js";
import type { SqliteDurabilitySettings } from "./sqlite-schema.js";
import type { SqliteSpaceSettings } from "./sqlite-maintenance.js";
import { EXPIRED_CODE, sqliteFailure, sqliteTimeout, type SqliteFailureContext } from "./sqlite-failure.js";
import { openReadOnly } from "./sqlite-readonly.js";
import { WriteClaims } from "./sqlite-write-claims.js";
import { CheckpointScheduler } from "./sqlite-checkpoint.js";
import { StoreFailure, isStoreFailure } from "./store-failure.js";
import type { ProbeResult } from "./sqlite-probe.js";
import { groupCommitParent, recordGroupCommit, type GroupCommitReport } from "../tracing/group-commit-span.js";
import type { Context } from "@opentelemetry/api";

type ArgsOf<K extends keyof SqliteOps> = Parameters<SqliteOps[K]["run"]>[1];
type ResultOf<K extends keyof SqliteOps> = ReturnType<SqliteOps[K]["run"]>;

/** Options for {@link SqliteDatabase.open}. */
export interface SqliteOpenOptions {
  /** File path, or `:memory:` for a private, non-durable database (tests only). */
  path: string;
  /**
   * Milliseconds one operation may take, queueing included, before its call
   * fails (`--store-timeout`, default 5000): a write the worker had started
   * with `StoreFailure("outcome_unknown")`, one it had not (cancelled, it never
   * runs) and a read with `unreachable`; a write the worker had already
   * answered, its answer not yet handled here, with that answer.
   */
  storeTimeoutMs?: number;
  /**
   * Milliseconds a write waits for another process's lock before failing with
   * `StoreFailure("unreachable")` (default: three quarters of
   * `storeTimeoutMs`, so that the lock's own error arrives before the call's
   * deadline).
   */
  busyTimeoutMs?: number;
  /**
   * Open an existing file read-only (default false): no pragma that writes, no
   * migrations, and only `read` operations succeed. Used to measure a store
   * beside the connection that writes it (issue 14), since a reader on its own
   * connection never holds up the writer's group commits (WAL).
   */
  readonly?: boolean;
}

/** Milliseconds between two write probes while writes fail for lack of space or an I/O error (see {@link SqliteDatabase.problem}). */
export const DISK_PROBE_INTERVAL_MS = 1000;

/** A request as posted to a worker (see sqlite-worker.ts). */
interface Request {
  id: number;
  op: string;
  args: unknown;
  deadline: number;
  /** A write's slot in the writer's {@link WriteClaims}; -1 for a read or an untracked write. */
  slot: number;
}

/**
 * One worker thread (sqlite-worker.ts) and the requests made for it in this
 * turn of the event loop, posted together in one message (one structured
 * clone, one wake-up of the worker). The message goes once the turn's I/O
 * callbacks have run (`setImmediate`), so the calls of every request that
 * arrived in one read of the sockets share it (issue 11).
 */
class WorkerLink {
  private outbox: Request[] = [];
  private transfer: ArrayBuffer[] = [];

  constructor(
    readonly worker: Worker,
    readonly port: MessagePort,
  ) {}

  /** Queues a request; `transfer` is memory moved to the worker with it (empty here afterwards). */
  send(request: Request, transfer: readonly ArrayBuffer[]): void {
    if (this.outbox.length === 0) setImmediate(() => this.flush());
    this.outbox.push(request);
    this.transfer.push(...transfer);
  }

  /** Posts the queued requests. */
  flush(): void {
    const requests = this.outbox;
    const transfer = this.transfer;
    this.outbox = [];
    this.transfer = [];
    if (requests.length > 0) this.port.postMessage({ type: "batch", requests }, transfer);
  }

  /** Finishes the queued requests, then closes the connection and ends the thread; resolves when it has exited. */
  close(): Promise<void> {
    const exited = new Promise<void>((resolve) => this.worker.once("exit", () => resolve()));
    this.flush();
    this.port.postMessage({ type: "close" });
    return exited;
  }
}

/**
 * Starts a worker on `path` and waits until its connection is open (and, for
 * the writer, migrated).
 *
 * @throws Error with SQLite's message when the file cannot be opened or migrated.
 */
async function startWorker(path: string, options: { busyTimeoutMs: number; durable: boolean; readonly: boolean; queryOnly?: boolean; checkpoints?: boolean; claims?: SharedArrayBuffer }): Promise<{ link: WorkerLink; settings: SqliteDurabilitySettings }> {
  const channel = new MessageChannel();
  const worker = new Worker(new URL("./sqlite-worker.js", import.meta.url), {
    workerData: { path, port: channel.port2, ...options },
    transferList: [channel.port2],
  });
  const settings = await new Promise<SqliteDurabilitySettings>((resolve, reject) => {
    const onMessage = (m: { type: string; message?: string; settings?: SqliteDurabilitySettings }) => {
      worker.off("message", onMessage);
      worker.off("error", reject);
      if (m.type === "ready") resolve(m.settings!);
      else reject(new Error(`cannot open SQLite database ${path}: ${m.message}`));
    };
    worker.on("message", onMessage);
    worker.once("error", reject);
  });
  return { link: new WorkerLink(worker, channel.port1), settings };
}

/**
 * Opens the main thread's read-only connection (`queryOnly`: see
 * {@link openReadOnly}). Without a busy timeout: a busy inline read is handed
 * to the reader worker instead of waiting here.
 *
 * @throws Error with SQLite's message when the file cannot be opened.
 */
function openInline(path: string, queryOnly: boolean): Database.Database {
  try {
    return openReadOnly(path, queryOnly, 0);
  } catch (err) {
    throw new Error(`cannot open SQLite database ${path}: ${(err as Error).message}`);
  }
}

/** What an inline read runs with: the main thread loads at most {@link INLINE_READ_BYTES} of payload. */
const INLINE_CONTEXT: OpContext = { notify: () => undefined, readBytes: INLINE_READ_BYTES };

/** One call waiting for the worker's answer. */
interface PendingCall {
  resolve: (v: unknown) => void;
  reject: (e: Error) => void;
  /** Epoch milliseconds after which the call fails with {@link sqliteTimeout}. */
  deadline: number;
  write: boolean;
  /** A large write (SqliteOp.large): its commit asks for a checkpoint at once. */
  large: boolean;
  /** For a write made inside a traced call: where its group-commit span goes (tracing/group-commit-span.ts). */
  trace: Context | undefined;
  /** A write's slot in {@link WriteClaims}; -1 for a read or an untracked write. */
  slot: number;
}

/**
 * The main thread's handle on an SQLite database. Calls are named operations
 * from the registry, typed by their argument and result shapes; each returns
 * a promise that settles when the operation is done, which for a write is
 * after its group commit has been fsynced. Where an operation runs (issue 11,
 * see sqlite-op.ts):
 *
 * - writes: on the writer worker, the only connection that writes;
 * - inline reads (point reads: Load, a ReadAfter page, LoadSchedule,
 *   LoadFire): on this thread's own read-only connection, at once, without a
 *   thread hop and never behind a write; when the row is larger than 1 MiB,
 *   or the connection is busy (SQLite recovering the WAL index), on the
 *   reader worker instead;
 * - every other read: on the reader worker's connection, which refuses
 *   writes (`query_only`) but runs the WAL checkpoints (sqlite-checkpoint.ts:
 *   they are not made inside a commit any more).
 *
 * All connections are in WAL mode, where a reader never waits for the writer
 * and a read started after a write was answered sees that write. With
 * `sqlite::memory:` (private to one connection) everything runs on the writer
 * worker; a `readonly` database has one worker, which reads.
 *
 * Emits `notify` events `(topic: string, data: unknown)` for changes the
 * committed operations reported (used by event-log follow), `fault`
 * `(err: StoreFailure)` if a worker dies, after which every call rejects,
 * and `health` whenever {@link problem} changes: a worker died, or writes
 * started failing (disk full, I/O error) or succeed again.
 *
 * Every call has a deadline (`storeTimeoutMs`); infrastructure errors reach
 * the caller as {@link StoreFailure}s classified by sqlite-failure.ts
 * (issue 9). After an operation fails because the disk is full or with an
 * I/O error, a tiny write is probed every {@link DISK_PROBE_INTERVAL_MS} ms
 * (sqlite-probe.ts) until one succeeds, so that health turns SERVING again as
 * soon as writes can. After every group commit it emits `commit`
 * `(writes: number)` with the number of write operations the commit carried
 * (committed or failed together; the `mecatl_drivers_group_commit_writes`
 * metric, issue 14).
 *
 * When tracing is on, a write made inside a traced call gets a child span for
 * the group commit it took part in, with the times and size the worker
 * reports (issue 14).
 */
export class SqliteDatabase extends EventEmitter {
  private nextId = 1;
  /** Calls in the order they were made, which is also the order of their deadlines. */
  private readonly pending = new Map<number, PendingCall>();
  private failure: StoreFailure | undefined;
  private closed: Promise<void> | undefined;
  /** Fires at the earliest deadline of {@link pending}. */
  private deadlineTimer: NodeJS.Timeout | undefined;
  /** Why writes cannot succeed (disk full, I/O error), until a probe write succeeds. */
  private writeProblem: string | undefined;
  private probeTimer: NodeJS.Timeout | undefined;
  private probing = false;
  /** WAL checkpoints on the reader worker (a read-write file only; sqlite-checkpoint.ts). */
  private readonly checkpoints: CheckpointScheduler | undefined;

  private constructor(
    readonly path: string,
    /** journal_mode and synchronous as the worker's connection reported them after opening, and (a read-write file) how it gives space back. */
    readonly settings: SqliteDurabilitySettings & Partial<SqliteSpaceSettings>,
    private readonly writer: WorkerLink,
    /** The worker for reads that are not inline: a second, read-only one for a read-write file, else the writer itself. */
    private readonly reader: WorkerLink,
    /** The main thread's read-only connection for inline reads (a file only). */
    private readonly inline: Database.Database | undefined,
    private readonly context: { read: SqliteFailureContext; write: SqliteFailureContext },
    /** Shared with the writer worker: whether a queued write started (sqlite-write-claims.ts). */
    private readonly claims: WriteClaims,
  ) {
    super();
    this.checkpoints = reader === writer ? undefined : new CheckpointScheduler(() => reader.port.postMessage({ type: "checkpoint" }));
    for (const link of new Set([writer, reader])) {
      link.port.on("message", (m) => this.onMessage(link, m));
      link.worker.on("error", (err) => this.fail(err));
      link.worker.on("exit", (code) => {
        if (this.closed === undefined) this.fail(new Error(`an SQLite worker exited unexpectedly (code ${code})`));
      });
    }
  }

  /**
   * Starts the writer worker, which opens the file (creating its directory),
   * applies the pragmas and every pending migration; then, for a file, the
   * reader worker (read-write files) and this thread's read-only connection.
   *
   * @throws Error with SQLite's message when the file cannot be opened or migrated.
   */
  static async open(options: SqliteOpenOptions): Promise<SqliteDatabase> {
    const memory = options.path === ":memory:";
    const readonly = options.readonly ?? false;
    if (!memory && !readonly) {
      try {
        mkdirSync(dirname(options.path), { recursive: true });
      } catch (err) {
        throw new Error(`cannot open SQLite database ${options.path}: ${(err as Error).message}`);
      }
    }
    const storeTimeoutMs = options.storeTimeoutMs ?? 5000;
    const busyTimeoutMs = options.busyTimeoutMs ?? Math.floor((storeTimeoutMs * 3) / 4);
    // A database read as a whole (copy source, stats) leaves no -wal/-shm files behind; a served one's readers need not care.
    const claims = new WriteClaims();
    const writer = await startWorker(options.path, { busyTimeoutMs, durable: !memory, readonly, queryOnly: readonly, claims: claims.memory });
    let reader = writer.link;
    let inline: Database.Database | undefined;
    if (!memory) {
      try {
        if (!readonly) reader = (await startWorker(options.path, { busyTimeoutMs, durable: true, readonly: true, queryOnly: true, checkpoints: true })).link;
        inline = openInline(options.path, readonly);
      } catch (err) {
        await Promise.all([writer.link.close(), reader === writer.link ? undefined : reader.close()]);
        throw err;
      }
    }
    const context = { busyTimeoutMs, storeTimeoutMs };
    return new SqliteDatabase(options.path, writer.settings, writer.link, reader, inline, { read: { ...context, write: false }, write: { ...context, write: true } }, claims);
  }

  /**
   * Why writes cannot succeed now, or undefined when they can: the worker
   * stopped, the database is closed, or an operation failed because the disk
   * is full or the files could not be read or written (until a probe write
   * succeeds). Health is NOT_SERVING while it is set (issue 9).
   */
  get problem(): string | undefined {
    if (this.failure !== undefined) return this.failure.message;
    if (this.closed !== undefined) return "the SQLite database is closed";
    return this.writeProblem;
  }

  /** True when {@link problem} is undefined. */
  get healthy(): boolean {
    return this.problem === undefined;
  }

  /** Milliseconds one operation may take (`--store-timeout`): each {@link call}'s deadline. */
  get storeTimeoutMs(): number {
    return this.context.read.storeTimeoutMs;
  }

  /**
   * Runs a named operation: a write on the writer worker, an inline read on
   * this thread when it fits, any other read on the reader worker.
   * `transfer` lists memory moved to the worker with the arguments instead of
   * copied: the caller must not touch it afterwards.
   *
   * @throws StoreFailure for an infrastructure condition (see
   *   sqlite-failure.ts: disk full, I/O error, lock held too long, no answer
   *   within `storeTimeoutMs`, worker stopped or database closed:
   *   `unreachable`); Error with SQLite's message for anything else (a bug:
   *   INTERNAL).
   */
  call<K extends keyof SqliteOps>(op: K, args: ArgsOf<K>, transfer: readonly ArrayBuffer[] = []): Promise<ResultOf<K>> {
    if (this.failure !== undefined) return Promise.reject(this.failure);
    if (this.closed !== undefined) return Promise.reject(new StoreFailure("unreachable", "the SQLite database is closed (the server is shutting down); nothing was written"));
    const spec = sqliteOps[op] as SqliteOp<unknown, unknown>;
    if (spec.inline && this.inline !== undefined) {
      const answer = this.readInline(spec, args);
      if (answer !== undefined) return answer as Promise<ResultOf<K>>;
    }
    const write = spec.kind === "write";
    const id = this.nextId++;
    const deadline = Date.now() + this.context.read.storeTimeoutMs;
    const slot = write ? this.claims.queue(id) : -1;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject, deadline, write, large: spec.large === true, trace: write ? groupCommitParent() : undefined, slot });
      this.deadlineTimer ??= this.armDeadline(deadline);
      (write ? this.writer : this.reader).send({ id, op, args, deadline, slot }, transfer);
    });
  }

  /**
   * Posts the calls made so far in this turn of the event loop to their
   * workers now rather than when the turn ends (calls are otherwise sent
   * together at its end): for a caller about to keep this thread busy, so
   * that the workers start on them meanwhile (the session store projects a
   * snapshot while its first staged chunk is written; issue 12).
   */
  postNow(): void {
    this.writer.flush();
    if (this.reader !== this.writer) this.reader.flush();
  }

  /**
   * Runs an inline read on this thread's connection. Returns undefined when
   * the read must go to the reader worker: the row is too large
   * ({@link NeedsWorker}) or the connection is busy.
   */
  private readInline(op: SqliteOp<unknown, unknown>, args: unknown): Promise<unknown> | undefined {
    try {
      return Promise.resolve(op.run(this.inline!, args, INLINE_CONTEXT));
    } catch (err) {
      const e = err as { message?: string; code?: string };
      if (err instanceof NeedsWorker || e.code?.startsWith("SQLITE_BUSY")) return undefined;
      return Promise.reject(this.failureOf(e.code, e.message ?? String(err), false));
    }
  }

  /** One timer for every pending call: calls are made in deadline order, so it only ever waits for the oldest. */
  private armDeadline(deadline: number): NodeJS.Timeout {
    const timer = setTimeout(() => this.expire(), Math.max(0, deadline - Date.now()));
    timer.unref();
    return timer;
  }

  /**
   * Fails every call whose deadline has passed, then waits for the next one:
   * a write the worker has not started with "nothing was written" (it is
   * cancelled and never runs, sqlite-write-claims.ts), a started one with "it
   * may still be committed", a read with "did not answer". A write the worker
   * has already answered (its slot freed, its reply not yet handled by this
   * busy thread) is left to that reply, which says what happened.
   */
  private expire(): void {
    this.deadlineTimer = undefined;
    const now = Date.now();
    for (const [id, call] of this.pending) {
      if (call.deadline > now) {
        this.deadlineTimer = this.armDeadline(call.deadline);
        return;
      }
      // A read's slot is -1: never cancelled, never answered meanwhile.
      const outcome = this.claims.cancel(id, call.slot);
      if (outcome === "answered") continue;
      this.pending.delete(id);
      // A write the worker has not started is cancelled here, and then never runs: nothing was written.
      if (outcome === "cancelled") call.reject(this.failureOf(EXPIRED_CODE, "cancelled unstarted at its deadline", true));
      else call.reject(sqliteTimeout(call.write ? this.context.write : this.context.read));
    }
  }

  /**
   * Finishes queued operations, closes the file and stops the workers. The
   * writer closes last: the last connection to close checkpoints the WAL
   * into the database file and removes it, which only a connection that
   * writes can do (a cleanly closed file is then one self-contained file).
   */
  close(): Promise<void> {
    if (this.closed !== undefined) return this.closed;
    clearInterval(this.probeTimer);
    this.checkpoints?.stop();
    const readers = this.reader === this.writer ? [] : [this.reader];
    const closing = async () => {
      if (this.failure !== undefined) {
        await Promise.all([this.writer, ...readers].map((l) => l.worker.terminate()));
      } else {
        this.writer.flush();
        await Promise.all(readers.map((l) => l.close()));
      }
      this.inline?.close();
      if (this.failure === undefined) await this.writer.close();
    };
    this.closed = closing();
    return this.closed;
  }

  private onMessage(link: WorkerLink, m: {
    type: string;
    replies?: Array<{ id: number; ok: boolean; value?: unknown; message?: string; sqliteCode?: string }>;
    notifications?: Array<{ topic: string; data: unknown }>;
    commit?: GroupCommitReport;
    result?: ProbeResult;
  }) {
    if (m.type === "replies") {
      let large = false;
      for (const r of m.replies ?? []) {
        const p = this.pending.get(r.id);
        if (p === undefined) continue;
        this.pending.delete(r.id);
        large ||= p.large;
        if (p.trace !== undefined && m.commit !== undefined && r.sqliteCode !== EXPIRED_CODE) recordGroupCommit(p.trace, m.commit, !r.ok, r.sqliteCode);
        if (r.ok) p.resolve(r.value);
        else p.reject(this.failureOf(r.sqliteCode, r.message ?? "unknown error", p.write));
      }
      for (const n of m.notifications ?? []) this.emit("notify", n.topic, n.data);
      if (m.commit !== undefined && m.commit.size > 0) {
        this.checkpoints?.committed(large);
        this.emit("commit", m.commit.size);
      }
    } else if (m.type === "checkpointed") {
      this.checkpoints?.done();
    } else if (m.type === "probe") {
      this.probing = false;
      if (m.result?.ok === true) this.setWriteProblem(undefined);
    } else if (m.type === "closed") {
      link.port.close();
    }
  }

  /**
   * The error a failed operation rejects with. A full disk or an I/O error
   * also turns health NOT_SERVING until a probe write succeeds (out of memory
   * and a lock held elsewhere pass by themselves and do not).
   */
  private failureOf(code: string | undefined, message: string, write: boolean): Error {
    const failure = sqliteFailure(code, message, write ? this.context.write : this.context.read);
    if (failure === undefined) return new Error(message);
    if (isStoreFailure(failure, "disk_full") && !code!.startsWith("SQLITE_NOMEM")) {
      this.setWriteProblem("the disk holding the SQLite database is full; writes fail until there is room again");
    } else if (isStoreFailure(failure, "io_error")) {
      this.setWriteProblem(`the SQLite database cannot use its files (${code}); writes fail until a probe write succeeds`);
    }
    return failure;
  }

  private setWriteProblem(problem: string | undefined): void {
    if (problem === this.writeProblem || (problem !== undefined && this.writeProblem !== undefined)) return;
    this.writeProblem = problem;
    if (problem === undefined) {
      clearInterval(this.probeTimer);
      this.probeTimer = undefined;
    } else {
      this.probeTimer = setInterval(() => this.probe(), DISK_PROBE_INTERVAL_MS);
      this.probeTimer.unref();
    }
    this.emit("health");
  }

  /** Asks the worker for one write probe, unless one is still running. */
  private probe(): void {
    if (this.probing || this.closed !== undefined || this.failure !== undefined) return;
    this.probing = true;
    this.writer.port.postMessage({ type: "probe" });
  }

  private fail(err: Error) {
    if (this.failure !== undefined) return;
    this.failure = new StoreFailure("unreachable", `the SQLite worker stopped (${err.message}); restart the server`, { cause: err });
    for (const p of this.pending.values()) p.reject(this.failure);
    this.pending.clear();
    clearTimeout(this.deadlineTimer);
    clearInterval(this.probeTimer);
    this.emit("fault", this.failure);
    this.emit("health");
  }
}
