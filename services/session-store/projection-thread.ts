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

/** A projection asked for and not answered yet. */
interface Pending {
  sessionId: string;
  payload: Uint8Array;
  activityState: ActivityState;
  resolve: (p: SessionProjection) => void;
  reject: (err: Error) => void;
}

/**
 * A pool of one worker thread (projection-worker.ts) projecting large
 * snapshot payloads off the main thread (issue 12), so that a store can
 * stage a payload while it is projected and wait for the longer of the two
 * instead of their sum. It answers what projection.ts `projectSnapshot`
 * answers for the same arguments.
 *
 * One projection is on the worker at a time, the others wait here in
 * order, holding only the caller's view of its payload. A payload that is
 * in shared memory already (a large gRPC request joined by
 * server/grpc-message-joiner.ts) is read by the worker where it is, with
 * no copy; any other payload is copied into a SharedArrayBuffer (the
 * request's bytes stay the caller's, untouched and verbatim), and that
 * buffer is reused from one
 * projection to the next ({@link SpareSharedBuffer}), so the copies cost
 * one buffer the size of the largest recent payload, however many large
 * Saves are in flight. A new buffer (the first large Save, a larger
 * payload, or one after the spare was released) has its pages touched by
 * the worker before the copy, so that the main thread does not take its
 * page faults.
 *
 * The worker starts on the first `project` call, not before (a server that
 * never sees a large Save never starts it), and does not keep the process
 * alive while it has nothing to do. If it dies (an error it did not catch,
 * its heap limit), the projection it was working on fails with
 * {@link ProjectionThreadError}, never hangs, and the waiting ones go to a
 * new worker.
 */
export class ProjectionThread {
  private worker: Worker | undefined;
  /** The projection on the worker, with its sequence number and buffer. */
  private current: { seq: number; job: Pending; buffer: SharedArrayBuffer | undefined } | undefined;
  private readonly waiting: Pending[] = [];
  private nextSeq = 1;
  private readonly spare = new SpareSharedBuffer(SPARE_BUFFER_IDLE_MS, THREAD_PROJECTION_BYTES);

  /** @param resourceLimits the worker's V8 limits (default: Node's); a projection allocates little beyond the top-level strings it decodes. */
  constructor(private readonly resourceLimits?: ResourceLimits) {}

  /**
   * Projects `payload` on the worker; see projection.ts `projectSnapshot`
   * for the rules. `payload` must not change until the answer (it is
   * copied when its turn comes).
   *
   * @throws SnapshotPayloadError (rejects) when the projection refuses the payload (the message names the field).
   * @throws ProjectionThreadError (rejects) when the worker stopped before answering.
   * @throws Error (rejects) with the worker's message for anything else the projection threw.
   */
  project(sessionId: string, payload: Uint8Array, activityState: ActivityState): Promise<SessionProjection> {
    return new Promise<SessionProjection>((resolve, reject) => {
      this.waiting.push({ sessionId, payload, activityState, resolve, reject });
      this.next();
    });
  }

  /** Ends the worker, if one runs; every projection not answered yet fails with {@link ProjectionThreadError}. Resolves once it has exited. */
  async stop(): Promise<void> {
    const stopped = new ProjectionThreadError("the projection worker was stopped before projecting the snapshot; nothing was written");
    for (const job of this.waiting.splice(0)) job.reject(stopped);
    const worker = this.worker;
    if (worker !== undefined) await worker.terminate();
  }

  /** Projections asked for and not answered yet (on the worker or waiting). */
  get inFlight(): number {
    return this.waiting.length + (this.current === undefined ? 0 : 1);
  }

  /** Hands the next waiting projection to the worker (starting one if none runs) when it is free; lets the process exit once none is left. */
  private next(): void {
    if (this.current !== undefined) return;
    const job = this.waiting.shift();
    if (job === undefined) {
      this.worker?.unref();
      return;
    }
    const worker = this.worker ?? this.start();
    worker.ref();
    const seq = this.nextSeq++;
    // A payload in shared memory already (a large gRPC request, server/grpc-message-joiner.ts) goes to the worker as is.
    if (job.payload.buffer instanceof SharedArrayBuffer) {
      this.current = { seq, job, buffer: undefined };
      return this.post(worker, job.payload);
    }
    const { buffer, fresh } = this.spare.take(job.payload.byteLength);
    this.current = { seq, job, buffer };
    // A fresh buffer's pages are first touched on the worker, not here (see projection-worker.ts `warm`); the copy follows its answer.
    if (fresh) worker.postMessage({ kind: "warm", seq, buffer } satisfies ProjectionJob);
    else this.postCopy(worker);
  }

  /** Copies the current projection's payload into its spare buffer and posts it. */
  private postCopy(worker: Worker): void {
    const { job, buffer } = this.current!;
    const copy = new Uint8Array(buffer!, 0, job.payload.byteLength);
    copy.set(job.payload);
    this.post(worker, copy);
  }

  /** Posts the current projection with `payload`, a view of shared memory holding its payload. */
  private post(worker: Worker, payload: Uint8Array): void {
    const { seq, job } = this.current!;
    worker.postMessage({ kind: "project", seq, sessionId: job.sessionId, payload, activityState: job.activityState } satisfies ProjectionJob);
  }

  /** Ends the current projection (its buffer back to the spare) and answers it with `settle`; then the next one. */
  private finish(settle: (job: Pending) => void): void {
    const current = this.current!;
    this.current = undefined;
    if (current.buffer !== undefined) this.spare.give(current.buffer);
    settle(current.job);
    this.next();
  }

  private start(): Worker {
    const worker = new Worker(new URL("./projection-worker.js", import.meta.url), { resourceLimits: this.resourceLimits });
    let failure: Error | undefined;
    worker.on("message", (reply: ProjectionReply) => {
      if (this.current?.seq !== reply.seq) return;
      if (reply.kind === "warmed") return this.postCopy(worker);
      this.finish((job) => {
        if (reply.ok) job.resolve(reply.projection);
        else if (reply.payloadError) job.reject(new SnapshotPayloadError(reply.message));
        else job.reject(Object.assign(new Error(`projecting the snapshot failed: ${reply.message}`), { name: reply.name }));
      });
    });
    worker.on("error", (err) => {
      failure = err;
    });
    worker.on("exit", (code) => {
      if (this.worker !== worker) return;
      this.worker = undefined;
      if (this.current === undefined) return;
      const why = failure === undefined ? `exit code ${code}` : failure.message;
      this.finish((job) => job.reject(new ProjectionThreadError(`the projection worker stopped before projecting the snapshot (${why}); nothing was written`, { cause: failure })));
    });
    this.worker = worker;
    return worker;
  }
}

let shared: ProjectionThread | undefined;

/** The process's projection thread, created on first use (its worker starts on the first large projection). */
export function sharedProjectionThread(): ProjectionThread {
  return (shared ??= new ProjectionThread());
}
