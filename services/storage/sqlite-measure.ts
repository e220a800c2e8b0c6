import type Database from "better-sqlite3";
import { STORE_KINDS, type KindSize, type StoreKind } from "./store-kinds.js";

/** Where each kind lives in the SQLite schema: the table counted for `records`, and every table whose pages (with their indexes') are its `bytes`. */
export type SqliteKindTables = Record<StoreKind, { counted: string; tables: readonly string[] }>;

/**
 * Measures an SQLite database on `db` (a read transaction per statement; the
 * caller runs it on a connection that does not carry the group commits).
 * Cost: one `count(*)` per kind (index-only, about 1 ms per 100k records) and
 * one pass of `dbstat` over every page of the file (about 0.3 ms per MiB when
 * the file is in the page cache).
 */
export function measureSqlite(db: Database.Database, kinds: SqliteKindTables): KindSize[] {
  const tableOf = new Map(
    db
      .prepare<[], { name: string; tbl_name: string }>("SELECT name, tbl_name FROM sqlite_schema WHERE type IN ('table', 'index')")
      .all()
      .map((r) => [r.name, r.tbl_name]),
  );
  const kindOf = new Map<string, StoreKind>();
  for (const kind of STORE_KINDS) for (const t of kinds[kind].tables) kindOf.set(t, kind);
  const bytes = new Map<KindSize["kind"], number>();
  for (const r of db.prepare<[], { name: string; pgsize: number }>("SELECT name, pgsize FROM dbstat WHERE aggregate = TRUE").all()) {
    const kind = kindOf.get(tableOf.get(r.name) ?? r.name) ?? "other";
    bytes.set(kind, (bytes.get(kind) ?? 0) + r.pgsize);
  }
  const pageSize = Number(db.pragma("page_size", { simple: true }));
  const freePages = Number(db.pragma("freelist_count", { simple: true }));
  const sizes: KindSize[] = STORE_KINDS.map((kind) => {
    const table = kinds[kind].counted;
    const records = tableOf.get(table) === table ? db.prepare<[], { n: number }>(`SELECT count(*) AS n FROM "${table}"`).get()!.n : 0;
    return { kind, records, bytes: bytes.get(kind) ?? 0 };
  });
  return [...sizes, { kind: "other", bytes: bytes.get("other") ?? 0 }, { kind: "free", bytes: freePages * pageSize }];
}
