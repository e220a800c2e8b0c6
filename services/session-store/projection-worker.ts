/**
 * The projection worker thread (issue 12): projects the large payloads of
 * Save and Create off the main thread, so that a Save waits for the longer
 * of its staging and its projection instead of their sum (see
 * projection-thread.ts, which starts it and talks to it).
 *
 * Each message from the main thread is one {@link ProjectionJob}, answered
 * by one {@link ProjectionReply}, in order:
 *
 * - `warm`: a SharedArrayBuffer the main thread has just allocated, not
 *   touched yet; every page of it is written here once, so that the page
 *   faults of fresh memory (on this project's VMs ~15 µs a page, 60 ms for
 *   16 MiB, far more than the copy) are taken on this thread, while the
 *   Save is staged, and not on the main thread during its copy;
 * - `project`: the payload, a view of a SharedArrayBuffer the main thread
 *   copied it into (nothing is copied again here), projected with
 *   {@link projectSnapshot} exactly as the main thread would; the answer is
 *   the projection (structured-cloned back), or the error, with whether it
 *   is a {@link SnapshotPayloadError} (the payload is refused:
 *   INVALID_ARGUMENT) or anything else (a bug: the write fails).
 */
import { parentPort } from "node:worker_threads";
import { projectSnapshot, SnapshotPayloadError, type SessionProjection } from "./projection.js";
import type { ActivityState } from "./activity.js";
import { sharedMemoryReleaser } from "../storage/shared-memory-release.js";

/** One task asked of the worker: warming a fresh buffer, or a projection. */
export type ProjectionJob =
  | { kind: "warm"; seq: number; buffer: SharedArrayBuffer }
  | {
      kind: "project";
      /** Matches the reply to its job. */
      seq: number;
      sessionId: string;
      /** The payload, a view of shared memory (the request's own, or a copy in the thread's spare buffer) that no thread writes until the reply. */
      payload: Uint8Array;
      activityState: ActivityState;
    };

/** The answer to one {@link ProjectionJob}. */
export type ProjectionReply =
  | { seq: number; kind: "warmed" }
  | { seq: number; kind: "projected"; ok: true; projection: SessionProjection }
  | { seq: number; kind: "projected"; ok: false; payloadError: boolean; name: string; message: string };

/** Bytes between two writes that touch every page of a buffer (the smallest page size of the platforms Node runs on). */
const PAGE_BYTES = 4096;

const port = parentPort;
if (port === null) throw new Error("projection-worker.js runs as a worker thread only");

const releaseSharedMemory = sharedMemoryReleaser();

port.on("message", (job: ProjectionJob) => {
  if (job.kind === "warm") {
    const bytes = new Uint8Array(job.buffer);
    for (let i = 0; i < bytes.length; i += PAGE_BYTES) bytes[i] = 0;
    port.postMessage({ seq: job.seq, kind: "warmed" } satisfies ProjectionReply);
    return;
  }
  let reply: ProjectionReply;
  try {
    reply = { seq: job.seq, kind: "projected", ok: true, projection: projectSnapshot(job.sessionId, job.payload, job.activityState) };
  } catch (err) {
    const e = err instanceof Error ? err : new Error(String(err));
    reply = { seq: job.seq, kind: "projected", ok: false, payloadError: err instanceof SnapshotPayloadError, name: e.name, message: e.message };
  }
  port.postMessage(reply);
  // The payload was a view of shared memory: let it go.
  releaseSharedMemory();
});
