/**
 * Global write counters of the backends, read from outside the server: a
 * value that changes whenever the store commits a write, whatever the key
 * (issue 10, deliverable 5: a refused request must store nothing).
 */
import { createHash } from "node:crypto";
import Database from "better-sqlite3";
import type { Redis } from "ioredis";
import type { WriteCounter } from "./fuzzer.js";

/**
 * The content of an SQLite file, read on a read-only connection of our own:
 * a SHA-256 over every row of every table (sqlite_schema order, each
 * table's rows in its own order, which an unchanged b-tree keeps), so it
 * changes exactly when a commit changed what is stored.
 *
 * `PRAGMA data_version` alone is not that: it also moves when a WAL
 * checkpoint (which the server runs on its own, about a second after small
 * writes: services/storage/sqlite-checkpoint.ts) has copied the WAL into the
 * database file, with nothing committed; the first 20,000-request run
 * counted 63 such checkpoints as writes. It is kept as a cheap pre-check:
 * the digest is computed again only when it moved.
 *
 * @returns the counter and a function that closes the connection.
 */
export function sqliteWriteCounter(file: string): { counter: WriteCounter; close(): void } {
  const db = new Database(file, { readonly: true, fileMustExist: true });
  let version: unknown;
  let digest = "";
  const contentDigest = () => {
    const hash = createHash("sha256");
    const tables = db.prepare<[], { name: string }>("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name").all();
    for (const { name } of tables) {
      hash.update(`\u0000table ${name}\u0000`);
      for (const row of db.prepare(`SELECT * FROM "${name.replaceAll('"', '""')}"`).raw().iterate() as Iterable<unknown[]>) {
        for (const value of row) hash.update(Buffer.isBuffer(value) ? Buffer.concat([Buffer.from("b"), value]) : `v${typeof value}:${String(value)}`).update("\u0001");
      }
    }
    return hash.digest("hex");
  };
  const counter = async () =>
    db.transaction(() => {
      const now = db.pragma("data_version", { simple: true });
      if (now !== version) [version, digest] = [now, contentDigest()];
      return digest;
    })();
  return { counter, close: () => db.close() };
}

/**
 * `rdb_changes_since_last_save` of a Redis server (INFO persistence): the
 * number of writes since the last RDB save, which never happens on a server
 * started with `--save ""` as the test helpers start it.
 */
export function redisWriteCounter(redis: Redis): WriteCounter {
  return async () => /rdb_changes_since_last_save:(\d+)/.exec(await redis.info("persistence"))?.[1] ?? "?";
}
