import pRetry from "p-retry";
import { Code } from "@connectrpc/connect";
import { InfrastructureError } from "./errors.js";
import type { CursorRecord, EventLogClient } from "./event-log-client.js";

/** Options of {@link followResuming}. */
export interface ResumingFollowOptions {
  /** Start strictly after this cursor (section 3.6); empty or absent: the beginning of the log. */
  cursor?: string;
  /** Records (gaps included) for the whole follow, across resumes; 0 or absent: unbounded. */
  limit?: number;
  /** Aborting ends the follow cleanly, also while it waits to resume. */
  signal?: AbortSignal;
  /**
   * How long, in milliseconds, the follow keeps trying to resume after an
   * interruption before it fails with the last error (default 300,000: five
   * minutes, which outlasts a server restart or a Redis failover); 0: the
   * first interruption ends the follow with its error, as a plain follow.
   */
  resumeForMs?: number;
  /** Told each time the follow was interrupted and is about to be opened again after `cursor` (`attempt` counts from 1 per interruption). */
  onInterrupted?: (err: InfrastructureError, cursor: string, attempt: number) => void;
}

/**
 * How long, in milliseconds, a resumed stream must stay open without failing
 * to count as resumed when no record comes (a server that is down or
 * refusing fails a call within milliseconds).
 */
const OPENED_MS = 250;

/** Resolves once `first` settles with a step or {@link OPENED_MS} pass; rejects when `first` fails before that. */
async function openedOrFailed(first: Promise<unknown>): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([first, new Promise((resolve) => (timer = setTimeout(resolve, OPENED_MS)))]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * True for a follow's end that a reader resumes from its last cursor: the
 * server or the connection went away (UNAVAILABLE: a server shutting down,
 * `--max-connection-age` cutting the connection, a lost connection, a store
 * outage; README "Shutdown") or the follower fell too far behind
 * (`follow_lagging`, wire-contract.md section 3.7).
 */
export function resumableFollowEnd(err: unknown): err is InfrastructureError {
  return err instanceof InfrastructureError && (err.code === Code.Unavailable || err.reason === "follow_lagging");
}

/**
 * A ReadAfter follow (wire-contract.md section 3.6) that outlives its
 * stream: when the stream ends in a way {@link resumableFollowEnd} accepts,
 * a new one is opened strictly after the last record delivered, so no record
 * is skipped or repeated. A resume that fails is tried again with a growing,
 * randomised backoff (p-retry: 100 ms doubling to 5 s) for up to
 * `resumeForMs` from the cut; a resume counts as done once its stream
 * delivers a record or stays open for a quarter second, so each later cut gets the
 * whole `resumeForMs` again. The first open is not retried, so a wrong target
 * fails at once. The clients themselves never retry (section 1): this is for
 * readers that want a log followed until they stop it, such as
 * `mecatl-drivers events tail`.
 *
 * @throws (from the iterator) what {@link EventLogClient.readAfter} throws
 *   that cannot be resumed (CursorExpiredError when the log was reset while
 *   the follow was away, CursorMalformedError, ...), and the last resumable
 *   error once `resumeForMs` has passed.
 */
export async function* followResuming(log: EventLogClient, sessionId: string, options: ResumingFollowOptions = {}): AsyncGenerator<CursorRecord, void, undefined> {
  const { signal, limit = 0 } = options;
  let cursor = options.cursor ?? "";
  let delivered = 0;
  const stopped = () => signal?.aborted === true;
  const open = () => log.readAfter(sessionId, { cursor, limit: limit === 0 ? 0 : limit - delivered, follow: true, signal })[Symbol.asyncIterator]();
  let stream = open();
  let pending = stream.next();
  // The first open is not retried: a stream that fails before it is open (a wrong target) fails the follow.
  await openedOrFailed(pending);
  for (;;) {
    try {
      for (let step = await pending; step.done !== true; step = await pending) {
        cursor = step.value.cursor;
        delivered++;
        yield step.value;
        pending = stream.next();
      }
      return;
    } catch (err) {
      if (!resumableFollowEnd(err) || stopped() || options.resumeForMs === 0) throw err;
      // The stream was cut after the last record the limit allowed, before its clean end: nothing is left to read.
      if (limit > 0 && delivered >= limit) return;
      options.onInterrupted?.(err, cursor, 1);
    }
    try {
      // An attempt succeeds once its stream delivers a record, ends, or stays open for OPENED_MS without failing
      // (a follow of a quiet log may wait for hours): then the clock and the backoff start over at the next cut.
      [stream, pending] = await pRetry(
        async () => {
          const next = open();
          const first = next.next();
          await openedOrFailed(first);
          return [next, first] as const;
        },
        {
          retries: Number.POSITIVE_INFINITY,
          minTimeout: 100,
          maxTimeout: 5_000,
          randomize: true,
          maxRetryTime: options.resumeForMs ?? 300_000,
          signal,
          shouldRetry: ({ error }) => resumableFollowEnd(error),
          onFailedAttempt: ({ error, attemptNumber }) => {
            if (resumableFollowEnd(error)) options.onInterrupted?.(error, cursor, attemptNumber + 1);
          },
        },
      );
    } catch (err) {
      if (stopped()) return;
      throw err;
    }
  }
}
