/** The least the limit of {@link GroupCommitLimit} falls to: requests per SQLite drain, Redis writes in flight. */
export const GROUP_COMMIT_MIN = 16;

/** The most the limit of {@link GroupCommitLimit} grows to. */
export const GROUP_COMMIT_MAX = 1024;

/**
 * How many queued requests an SQLite worker takes into one drain, and so how
 * many writes at most share one group commit (one transaction, one fsync;
 * sqlite-worker.ts); the same rule bounds the writes in flight to one Redis
 * (one node of a cluster; redis-write-window.ts). Issue 11.
 *
 * Taking everything queued looks cheapest, one fsync for all, but it makes
 * calls travel in one convoy: the worker commits all 64 writes in flight,
 * answers them together, the main thread sends 64 answers, the client sends
 * 64 new calls, and while one side works the other waits. Measured on 2
 * cores at 64 Renews in flight, the writer sat idle 13–16 ms between 2 ms
 * commits. Smaller groups keep every stage busy: the first answers travel
 * back while the worker commits the next group (Renew at 64 in flight went
 * from 0.76 to 0.89 of the transport floor, Append from 0.71 to 0.88;
 * bench/RESULTS.md). On a slow disk, though, the fsync is what bounds
 * throughput, and groups must be large to share it.
 *
 * So the limit adapts after every drain, from what is left queued:
 *
 * - a whole group or more still waiting: the worker is the bottleneck, the
 *   limit doubles (at most {@link GROUP_COMMIT_MAX});
 * - nothing waiting: the worker keeps up, the limit halves (at least
 *   {@link GROUP_COMMIT_MIN});
 * - otherwise it stays.
 *
 * On a disk that syncs in about 1 ms the limit stays near the minimum; where
 * each commit takes 5 ms it grows until one group takes in what arrives
 * during a commit, as taking everything did.
 */
export class GroupCommitLimit {
  /** Requests the next drain may take. */
  size = GROUP_COMMIT_MIN;

  /** Adapts {@link size} after a drain that left `waiting` requests queued. */
  adapt(waiting: number): void {
    if (waiting >= this.size) this.size = Math.min(this.size * 2, GROUP_COMMIT_MAX);
    else if (waiting === 0) this.size = Math.max(this.size / 2, GROUP_COMMIT_MIN);
  }
}
