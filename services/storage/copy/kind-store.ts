import type { CanonicalItem } from "./canonical.js";

/**
 * The backend-neutral export/import interface `mecatl-drivers copy` works
 * through (issue 14): every backend that implements a {@link KindStore} for
 * each {@link CopyKind} can be copied to and from any other, whatever its key
 * or table layout. The copy never touches raw keys or tables itself.
 */

/**
 * The kinds of record a store holds, in the order `copy` moves them:
 * snapshots with their metadata rows (`sessions`), lineage records with their
 * tombstones (`lineage`), event logs with their generations and positions
 * (`events`), lease records with their token high-water marks (`leases`),
 * schedules and fire records (`fires`). Sessions come before lineage because
 * storing a snapshot also writes the lineage record of its incarnation, which
 * the lineage kind then sets to exactly what the source holds.
 */
export const COPY_KINDS = ["sessions", "lineage", "events", "leases", "schedules", "fires"] as const;

/** One of {@link COPY_KINDS}. */
export type CopyKind = (typeof COPY_KINDS)[number];

/**
 * Where a read of one id starts: 0 for the beginning; for an id whose
 * records come in chunks (an event log), the `next` an earlier read answered.
 */
export interface CopyReadRequest {
  id: string;
  after: number;
}

/**
 * What one read of one id found: its record (a chunk of records for an event
 * log), or undefined when the id no longer exists; and `next`, the `after` to
 * read the id again from when more remains, else undefined.
 */
export interface CopyChunk<R> {
  record: R | undefined;
  next: number | undefined;
}

/**
 * One kind of record in one store, as the copy reads and writes it. Ids are
 * the kind's natural keys, the same on every backend (session id, lineage
 * record id, session id of an event log, session id of a lease, schedule
 * name, fire id), so two stores can be compared id by id.
 */
export interface KindStore<R> {
  /** Every id of the kind the store holds, in no particular order. */
  ids(): Promise<string[]>;
  /**
   * Reads the records of each request, in request order (one answer per
   * request). An id that vanished since {@link ids} answers `record`
   * undefined.
   */
  read(requests: readonly CopyReadRequest[]): Promise<Array<CopyChunk<R>>>;
  /**
   * Stores `records` as they are (upsert), durably before it resolves.
   * Idempotent: writing a record again (a resumed copy re-sends the batch
   * that was in flight when it stopped) leaves the store as after one write.
   */
  write(records: readonly R[]): Promise<void>;
}

/**
 * The backend-neutral description of a kind's records, shared by every
 * backend: how to name, count and measure a record, and its canonical form
 * for the verification digest.
 */
export interface KindFormat<R> {
  readonly kind: CopyKind;
  /** The record's id (see {@link KindStore}). */
  id(record: R): string;
  /** An id as people read it in a report (the id itself unless the kind builds ids from several fields). */
  label(id: string): string;
  /** Records it counts as (an event-log chunk counts its events). */
  count(record: R): number;
  /** Payload bytes it carries, for progress (snapshot, event and fire payloads, spec texts). */
  bytes(record: R): number;
  /**
   * Its canonical forms: one item per thing the digest covers, equal on
   * every backend for equal content (an event-log chunk gives one per event,
   * plus the log's header with its first chunk).
   */
  items(record: R): CanonicalItem[];
}

/** A {@link KindStore} for every kind: what a backend implements to be copied from and to. */
export type StoreKinds = { [K in CopyKind]: KindStore<unknown> };

/** Answers reads of a kind whose ids hold one record each (everything but event logs): `readOne` per id, never a `next`. */
export function wholeRecords<R>(requests: readonly CopyReadRequest[], readOne: (id: string) => R | undefined): Array<CopyChunk<R>> {
  return requests.map((r) => ({ record: readOne(r.id), next: undefined }));
}

/** Like {@link wholeRecords} for a backend whose reads are asynchronous: every id read at once, answered in request order. */
export async function readEach<R>(requests: readonly CopyReadRequest[], readOne: (id: string) => Promise<R | undefined>): Promise<Array<CopyChunk<R>>> {
  const found = await Promise.all(requests.map((r) => readOne(r.id)));
  return found.map((record) => ({ record, next: undefined }));
}
