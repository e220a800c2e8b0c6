import { Worker, MessageChannel } from "node:worker_threads";
import { EventEmitter } from "node:events";
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import type { SqliteOps } from "./sqlite-registry.js";

type ArgsOf<K extends keyof SqliteOps> = Parameters<SqliteOps[K]["run"]>[1];
type ResultOf<K extends keyof SqliteOps> = ReturnType<SqliteOps[K]["run"]>;

/** Options for {@link SqliteDatabase.open}. */
export interface SqliteOpenOptions {
  /** File path, or `:memory:` for a private, non-durable database (tests only). */
  path: string;
  /** Milliseconds a write waits for another process's lock before failing (default 5000). */
  busyTimeoutMs?: number;
  /**
   * Open an existing file read-only (default false): no pragma that writes, no
   * migrations, and only `read` operations succeed. Used to measure a store
   * beside the connection that writes it (issue 14), since a reader on its own
   * connection never holds up the writer's group commits (WAL).
   */
  readonly?: boolean;
}

/**
 * The main thread's handle on the SQLite worker (see sqlite-worker.ts). Calls
 * are named operations from the registry, typed by their argument and result
 * shapes; each returns a promise that settles when the worker answers, which
 * for a write is after its group commit has been fsynced.
 *
 * Emits `notify` events `(topic: string, data: unknown)` for changes the
 * committed operations reported (used by event-log follow), `commit`
 * `(writes: number)` after every group commit with the number of write
 * operations it carried (committed or failed together; the
 * `mecatl_drivers_group_commit_writes` metric, issue 14), and `fault`
 * `(err: Error)` if the worker dies, after which every call rejects.
 */
export class SqliteDatabase extends EventEmitter {
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private failure: Error | undefined;
  /** Requests made in this turn of the event loop, posted together in one message. */
  private outbox: Array<{ id: number; op: string; args: unknown }> = [];
  private closed: Promise<void> | undefined;

  private constructor(
    readonly path: string,
    private readonly worker: Worker,
    private readonly port: import("node:worker_threads").MessagePort,
  ) {
    super();
  }

  /**
   * Starts the worker, opens the file (creating its directory), applies the
   * pragmas and every pending migration.
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
    const channel = new MessageChannel();
    const worker = new Worker(new URL("./sqlite-worker.js", import.meta.url), {
      workerData: { path: options.path, port: channel.port2, busyTimeoutMs: options.busyTimeoutMs ?? 5000, durable: !memory, readonly },
      transferList: [channel.port2],
    });
    await new Promise<void>((resolve, reject) => {
      const onMessage = (m: { type: string; message?: string }) => {
        worker.off("message", onMessage);
        worker.off("error", reject);
        if (m.type === "ready") resolve();
        else reject(new Error(`cannot open SQLite database ${options.path}: ${m.message}`));
      };
      worker.on("message", onMessage);
      worker.once("error", reject);
    });
    const db = new SqliteDatabase(options.path, worker, channel.port1);
    channel.port1.on("message", (m) => db.onMessage(m));
    worker.on("error", (err) => db.fail(err));
    worker.on("exit", (code) => {
      if (db.closed === undefined) db.fail(new Error(`the SQLite worker exited unexpectedly (code ${code})`));
    });
    return db;
  }

  /** True when the worker is running and the database is open. */
  get healthy(): boolean {
    return this.failure === undefined && this.closed === undefined;
  }

  /**
   * Runs a named operation on the worker.
   *
   * @throws Error when the operation throws (SQLite errors keep their message),
   *   when the worker has failed, or when the database is closed.
   */
  call<K extends keyof SqliteOps>(op: K, args: ArgsOf<K>): Promise<ResultOf<K>> {
    if (this.failure !== undefined) return Promise.reject(this.failure);
    if (this.closed !== undefined) return Promise.reject(new Error("the SQLite database is closed"));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      if (this.outbox.length === 0) queueMicrotask(() => this.flush());
      this.outbox.push({ id, op, args });
    });
  }

  /** Posts every request of this turn in one message (one structured clone, one wake-up of the worker). */
  private flush(): void {
    const batch = this.outbox;
    this.outbox = [];
    if (batch.length > 0) this.port.postMessage({ type: "batch", requests: batch });
  }

  /** Finishes queued operations, closes the file and stops the worker. */
  close(): Promise<void> {
    if (this.closed !== undefined) return this.closed;
    this.closed = new Promise<void>((resolve) => {
      if (this.failure !== undefined) {
        void this.worker.terminate().then(() => resolve());
        return;
      }
      this.worker.once("exit", () => resolve());
      this.flush();
      this.port.postMessage({ type: "close" });
    });
    return this.closed;
  }

  private onMessage(m: { type: string; replies?: Array<{ id: number; ok: boolean; value?: unknown; message?: string }>; notifications?: Array<{ topic: string; data: unknown }>; writes?: number }) {
    if (m.type === "replies") {
      for (const r of m.replies ?? []) {
        const p = this.pending.get(r.id);
        if (p === undefined) continue;
        this.pending.delete(r.id);
        if (r.ok) p.resolve(r.value);
        else p.reject(new Error(r.message));
      }
      for (const n of m.notifications ?? []) this.emit("notify", n.topic, n.data);
      if (m.writes !== undefined && m.writes > 0) this.emit("commit", m.writes);
    } else if (m.type === "closed") {
      this.port.close();
    }
  }

  private fail(err: Error) {
    if (this.failure !== undefined) return;
    this.failure = err;
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
    this.emit("fault", err);
  }
}
