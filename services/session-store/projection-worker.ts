/**
 * The projection worker thread (issue 12): projects the large payloads of
 * Save and Create off the main thread, so that a Save waits for the longer
 * of its staging and its projection instead of their sum (see
 * projection-thread.ts, which starts it and talks to it).
 *
 * Each message from the main thread is one {@link ProjectionJob}: the payload
 * is a view of a SharedArrayBuffer the main thread copied it into (nothing is
 * copied again here), projected with {@link projectSnapshot} exactly as the
 * main thread would. Each job gets one {@link ProjectionReply}: the
 * projection (structured-cloned back), or the error, with whether it is a
 * {@link SnapshotPayloadError} (the payload is refused: INVALID_ARGUMENT) or
 * anything else (a bug: the write fails). Jobs are answered in order.
 */
import { parentPort } from "node:worker_threads";
import { projectSnapshot, SnapshotPayloadError, type SessionProjection } from "./projection.js";
import type { ActivityState } from "./activity.js";

/** One projection asked of the worker. */
export interface ProjectionJob {
  /** Matches the reply to its job. */
  seq: number;
  sessionId: string;
  /** Holds the payload in its first `length` bytes; the main thread does not touch it until the reply. */
  buffer: SharedArrayBuffer;
  length: number;
  activityState: ActivityState;
}

/** The answer to one {@link ProjectionJob}. */
export type ProjectionReply =
  | { seq: number; ok: true; projection: SessionProjection }
  | { seq: number; ok: false; payloadError: boolean; name: string; message: string };

const port = parentPort;
if (port === null) throw new Error("projection-worker.js runs as a worker thread only");

port.on("message", (job: ProjectionJob) => {
  let reply: ProjectionReply;
  try {
    reply = { seq: job.seq, ok: true, projection: projectSnapshot(job.sessionId, new Uint8Array(job.buffer, 0, job.length), job.activityState) };
  } catch (err) {
    const e = err instanceof Error ? err : new Error(String(err));
    reply = { seq: job.seq, ok: false, payloadError: err instanceof SnapshotPayloadError, name: e.name, message: e.message };
  }
  port.postMessage(reply);
});
