import { Worker, type ResourceLimits } from "node:worker_threads";
import type { ActivityState } from "./activity.js";
import { SnapshotPayloadError, type SessionProjection } from "./projection.js";
import type { ProjectionJob, ProjectionReply } from "./projection-worker.js";
import { SpareSharedBuffer } from "./spare-shared-buffer.js";

/**
 * Payload bytes above which Save and Create project on the
 * {@link ProjectionThread} rather than inline (1 MiB): the payloads both
 * backends stage in chunks (SQLite `STAGE_BYTES`, Redis
 * `INLINE_PAYLOAD_BYTES`), whose staging the projection then overlaps. A
 * smaller payload projects in well under a millisecond, less than the hop
 * to a worker and back.
 */
export const THREAD_PROJECTION_BYTES = 1024 * 1024;

/** Milliseconds the copy buffer of the last large projection is kept for the next one (see {@link SpareSharedBuffer}). */
export const SPARE_BUFFER_IDLE_MS = 30_000;

/** The projection worker stopped (crashed, ran out of memory, was stopped) before it answered: nothing was projected. */
export class ProjectionThreadError extends Error {
  override name = "ProjectionThreadError";
}

interface Pending {
  resolve: (p: SessionProjection) => void;
  reject: (err: Error) => void;
  buffer: SharedArrayBuffer;
}

/**
 * A pool of one worker thread (projection-worker.ts) projecting large
 * snapshot payloads off the main thread (issue 12): `project` copies the
 * payload into a SharedArrayBuffer (the request's bytes stay the caller's,
 * untouched and verbatim), posts it, and answers what
 * {@link projectSnapshot} answers there, so a store can stage the payload
 * while it is projected and wait for the longer of the two instead of
 * their sum.
 *
 * The worker starts on the first `project` call, not before (a server that
 * never sees a large Save never starts it), and does not keep the process
 * alive while it has nothing to do. One worker serves every call, in order.
 * If it dies (an error it did not catch, its heap limit, `stop`), every
 * projection it had not answered fails with {@link ProjectionThreadError},
 * never hangs, and the next call starts a new worker.
 */
export class ProjectionThread {
  private worker: Worker | undefined;
  private readonly pending = new Map<number, Pending>();
  private nextSeq = 1;
  private readonly spare = new SpareSharedBuffer(SPARE_BUFFER_IDLE_MS, THREAD_PROJECTION_BYTES);

  /** @param resourceLimits the worker's V8 limits (default: Node's); a projection allocates little beyond the top-level strings it decodes. */
  constructor(private readonly resourceLimits?: ResourceLimits) {}

  /**
   * Projects `payload` on the worker; see projection.ts `projectSnapshot`
   * for the rules. The payload is copied before this returns: the caller may
   * go on using it.
   *
   * @throws SnapshotPayloadError (rejects) when the projection refuses the payload (the message names the field).
   * @throws ProjectionThreadError (rejects) when the worker stopped before answering.
   * @throws Error (rejects) with the worker's message for anything else the projection threw.
   */
  project(sessionId: string, payload: Uint8Array, activityState: ActivityState): Promise<SessionProjection> {
    const worker = this.worker ?? this.start();
    const buffer = this.spare.take(payload.byteLength);
    new Uint8Array(buffer, 0, payload.byteLength).set(payload);
    const seq = this.nextSeq++;
    const job: ProjectionJob = { seq, sessionId, buffer, length: payload.byteLength, activityState };
    const answer = new Promise<SessionProjection>((resolve, reject) => this.pending.set(seq, { resolve, reject, buffer }));
    if (this.pending.size === 1) worker.ref();
    worker.postMessage(job);
    return answer;
  }

  /** Ends the worker, if one runs; projections it had not answered fail with {@link ProjectionThreadError}. Resolves once it has exited. */
  async stop(): Promise<void> {
    const worker = this.worker;
    if (worker !== undefined) await worker.terminate();
  }

  /** Projections posted and not answered yet. */
  get inFlight(): number {
    return this.pending.size;
  }

  private start(): Worker {
    const worker = new Worker(new URL("./projection-worker.js", import.meta.url), { resourceLimits: this.resourceLimits });
    worker.unref();
    let failure: Error | undefined;
    worker.on("message", (reply: ProjectionReply) => {
      const p = this.pending.get(reply.seq);
      if (p === undefined) return;
      this.settle(reply.seq, p);
      if (reply.ok) p.resolve(reply.projection);
      else if (reply.payloadError) p.reject(new SnapshotPayloadError(reply.message));
      else p.reject(Object.assign(new Error(`projecting the snapshot failed: ${reply.message}`), { name: reply.name }));
    });
    worker.on("error", (err) => {
      failure = err;
    });
    worker.on("exit", (code) => {
      if (this.worker === worker) this.worker = undefined;
      const why = failure === undefined ? `exit code ${code}` : failure.message;
      for (const [seq, p] of [...this.pending]) {
        this.settle(seq, p);
        p.reject(new ProjectionThreadError(`the projection worker stopped before projecting the snapshot (${why}); nothing was written`, { cause: failure }));
      }
    });
    this.worker = worker;
    return worker;
  }

  /** Forgets an answered projection, hands its buffer back, and lets the process exit once nothing is pending. */
  private settle(seq: number, p: Pending): void {
    this.pending.delete(seq);
    this.spare.give(p.buffer);
    if (this.pending.size === 0) this.worker?.unref();
  }
}

let shared: ProjectionThread | undefined;

/** The process's projection thread, created on first use (its worker starts on the first large projection). */
export function sharedProjectionThread(): ProjectionThread {
  return (shared ??= new ProjectionThread());
}
