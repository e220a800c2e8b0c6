/**
 * Key layout in Redis. Every key starts with the operator's prefix
 * (`--redis-key-prefix`, default `mecatl-drivers:`) followed by the schema
 * version `v1:`, so a future layout can live beside this one. Every key that
 * belongs to one session or one schedule carries that id in a hash tag
 * (`{...}`), so all of one session's keys share a Redis Cluster slot
 * (DESIGN.md "Backends").
 */
export class RedisKeys {
  /** The prefix every key of this store starts with, e.g. `mecatl-drivers:v1:`. */
  readonly base: string;

  /**
   * @param prefix the operator's prefix; must not contain `{` or `}`.
   * @throws Error when the prefix contains a brace (it would break hash tags).
   */
  constructor(prefix: string) {
    if (/[{}]/.test(prefix)) throw new Error(`--redis-key-prefix ${JSON.stringify(prefix)} must not contain { or }`);
    this.base = `${prefix}v1:`;
  }

  /** Hash holding one session's snapshot: fields `format`, `payload`, `modified_us`. */
  snapshot(sessionId: string): string {
    return `${this.base}session:{${sessionId}}:snapshot`;
  }

  /**
   * Hash holding the lease on one session id: `owner`, `token`, `expiry_us`
   * while held, and `high_water` (highest token ever granted) from the first
   * grant on. Not part of {@link sessionData}: the high-water mark must
   * outlive the session so tokens stay monotone (wire-contract.md section 4.3).
   */
  lease(sessionId: string): string {
    return `${this.base}session:{${sessionId}}:lease`;
  }

  /** Sorted set of session ids scored by save time in microseconds (List index). */
  sessionIndex(): string {
    return `${this.base}sessions`;
  }

  /**
   * Hash holding one session's event-log header: `gen` (the generation, 16
   * hex characters) and `n` (the number of records, the last position).
   */
  eventLogMeta(sessionId: string): string {
    return `${this.base}session:{${sessionId}}:events:meta`;
  }

  /** Stream holding one session's event-log records, entry id `0-<position>`. */
  eventLog(sessionId: string): string {
    return `${this.base}session:{${sessionId}}:events`;
  }

  /**
   * Pub/Sub channel on which changes of one session's event log are
   * announced: `<generation>:<length>` after an append, empty when the
   * session was deleted. A wake-up hint only; followers re-read the log.
   */
  eventLogChannel(sessionId: string): string {
    return `${this.base}session:{${sessionId}}:events:changed`;
  }

  /**
   * Every key that holds data of one session, deleted together when the
   * session is deleted (the event log travels with its session, DESIGN.md
   * "Event log").
   */
  sessionData(sessionId: string): string[] {
    return [this.snapshot(sessionId), this.eventLogMeta(sessionId), this.eventLog(sessionId)];
  }

  /** Channels told (with an empty message) when the session is deleted, so followers elsewhere notice. */
  sessionDeleteChannels(sessionId: string): string[] {
    return [this.eventLogChannel(sessionId)];
  }

  /**
   * Hash holding one schedule: fields `spec`, `owned`, `max_fires`, `state`,
   * and `ver`, the commit version (kept when the schedule is deleted so a
   * re-created schedule never repeats a version a stale reader saw).
   */
  schedule(name: string): string {
    return `${this.base}schedule:{${name}}`;
  }

  /**
   * Sorted set of the fire ids whose record names this schedule, every
   * score 0 so they are read in byte order, a page at a time (ListFires
   * index, issue 10).
   */
  scheduleFires(name: string): string {
    return `${this.base}schedule:{${name}}:fire-ids`;
  }

  /**
   * Sorted set of every schedule name, every score 0 so names are read in
   * byte order, a page at a time (ListSchedules index, issue 10).
   */
  scheduleIndex(): string {
    return `${this.base}schedules:by-name`;
  }

  /** Sorted set of the schedules that can be due, scored by NextFireAt in whole milliseconds (Due index). */
  scheduleDueIndex(): string {
    return `${this.base}schedules:due`;
  }

  /** Hash holding one fire record: fields `payload` and `ver` (commit version). */
  scheduleFire(fireId: string): string {
    return `${this.base}schedule-fire:{${fireId}}`;
  }
}
