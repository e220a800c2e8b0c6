/** The kinds of record a store's size is reported by (issue 14). */
export const STORE_KINDS = ["sessions", "events", "leases", "schedules", "fires"] as const;

/** One kind of record: snapshots, event-log records, lease records, schedules, fire records. */
export type StoreKind = (typeof STORE_KINDS)[number];

/**
 * The size of one kind in a store (issue 14). `records` counts snapshots,
 * event-log records (gaps included), lease records (one per session id ever
 * leased: the token high-water mark outlives a release), schedules and fire
 * records. `bytes` is what the kind occupies: on SQLite the pages of its
 * tables and indexes in the database file (`dbstat`, WAL not included), on
 * Redis the `MEMORY USAGE` estimates of its keys, indexes included.
 *
 * Two pseudo-kinds carry bytes only (`records` undefined): `other` (SQLite's
 * schema and migration tables, keys or tables this build does not know) and,
 * on SQLite, `free` (pages on the freelist, reusable but not yet given back to
 * the file system).
 */
export interface KindSize {
  kind: StoreKind | "other" | "free";
  records?: number;
  bytes: number;
}
