import type { SessionProjection } from "./projection.js";

/**
 * The projection a write is stored with, as a store receives it (issue 12):
 * computed already, or a function computing it, on this thread (answering
 * it) or on the projection worker (answering a promise of it;
 * projection-thread.ts). A function lets a store project while it writes
 * something else: both backends stage a payload above 1 MiB in chunks and
 * start the projection as the staging starts, so that a large Save waits
 * for the longer of the two, not their sum. A store starts it at most once
 * per write ({@link ProjectionRun}), and always waits for it before the
 * write is visible; whatever it throws (the service's INVALID_ARGUMENT for
 * a payload the projection refuses) is the write's answer, and nothing is
 * changed.
 */
export type ProjectionSource = SessionProjection | (() => SessionProjection | Promise<SessionProjection>);

/**
 * One write's projection, started once: {@link start} runs the source (a
 * function source runs now: inline, or by handing the payload to the worker)
 * and every later call answers the same promise. Its failure never goes
 * unhandled, and {@link throwIfFailed} lets a store stop staging as soon as
 * the projection is known to have failed.
 */
export class ProjectionRun {
  private started: Promise<SessionProjection> | undefined;
  private failure: { error: unknown } | undefined;

  constructor(private readonly source: ProjectionSource) {}

  /** Starts the projection (once); answers it, or rejects with what the source threw. */
  start(): Promise<SessionProjection> {
    if (this.started === undefined) {
      const source = this.source;
      let started: Promise<SessionProjection>;
      try {
        started = Promise.resolve(typeof source === "function" ? source() : source);
      } catch (error) {
        this.failure = { error };
        started = Promise.reject(error);
      }
      started.catch((error: unknown) => {
        this.failure ??= { error };
      });
      this.started = started;
    }
    return this.started;
  }

  /** Throws the projection's error if it has started and already failed; a no-op otherwise. */
  throwIfFailed(): void {
    if (this.failure !== undefined) throw this.failure.error;
  }
}
