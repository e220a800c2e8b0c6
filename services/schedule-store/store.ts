import type { IndexScan } from "../storage/index-scan.js";
import type { MutationReply, ScheduleMutation } from "./rules.js";
import type { ScheduleDocument } from "./schedule.js";

/**
 * What a store answers to a mutation: the rule's reply, or `contended` when a
 * backend that commits optimistically (Redis) lost the race for the schedule
 * too many times in a row and gave up without writing anything.
 */
export type StoreReply = MutationReply | { ok: false; error: "contended" };

/**
 * The backend-neutral schedule store behind ScheduleStoreService and
 * ScheduleOneShotReArmerService (wire-contract.md section 5). Implementations
 * store and index; the transition rules are rules.ts's, applied atomically
 * per schedule; validation and status mapping live in service.ts. Every
 * mutation resolves only once durable. A rejection is an infrastructure
 * failure, normally
 * a StoreFailure (storage/store-failure.ts: UNAVAILABLE or RESOURCE_EXHAUSTED;
 * it says when a write may have been applied), anything else INTERNAL.
 *
 * Schedules are {@link ScheduleDocument}s: the verbatim Spec text plus the
 * decoded State. Fire records are JSON texts, returned exactly as stored.
 */
export interface ScheduleStore {
  /**
   * Applies one rule (rules.ts `applyMutation`) to the schedule and fire
   * record it targets, atomically against every other writer on the same
   * store, and stores what it produced together with the Due and ListFires
   * indexes.
   */
  mutate(m: ScheduleMutation): Promise<StoreReply>;
  /** The schedule stored under `name`, or undefined. */
  load(name: string): Promise<ScheduleDocument | undefined>;
  /**
   * Every schedule, read lazily in bounded pages (issue 10) in name byte
   * order, each once. A schedule stored for the whole scan is read; one
   * saved or deleted meanwhile may or may not be.
   */
  scan(): IndexScan<ScheduleDocument>;
  /**
   * The schedules due at `now` (nanoseconds; rules.ts `isDue`), read lazily
   * in bounded pages through the next-fire index, never by scanning every
   * schedule, each once. No side effects.
   */
  scanDue(now: bigint): AsyncIterable<ScheduleDocument>;
  /** The fire record stored under `fireId`, as text, or undefined. */
  loadFire(fireId: string): Promise<string | undefined>;
  /**
   * Every fire record whose ScheduleName is `scheduleName`, read lazily in
   * bounded pages through a per-schedule index, each once; undefined when no
   * schedule of that name exists (an existing schedule without fires gives
   * an empty scan).
   */
  scanFires(scheduleName: string): Promise<IndexScan<string> | undefined>;
}
