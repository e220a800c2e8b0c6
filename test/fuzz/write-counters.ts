/**
 * Global write counters of the backends, read from outside the server: a
 * value that changes whenever the store commits a write, whatever the key
 * (issue 10, deliverable 5: a refused request must store nothing).
 */
import Database from "better-sqlite3";
import type { Redis } from "ioredis";
import type { WriteCounter } from "./fuzzer.js";

/**
 * `PRAGMA data_version` of an SQLite file, read on a read-only connection of
 * our own: it changes whenever another connection commits (sqlite.org/pragma.html#pragma_data_version).
 *
 * @returns the counter and a function that closes the connection.
 */
export function sqliteWriteCounter(file: string): { counter: WriteCounter; close(): void } {
  const db = new Database(file, { readonly: true, fileMustExist: true });
  return { counter: async () => String(db.pragma("data_version", { simple: true })), close: () => db.close() };
}

/**
 * `rdb_changes_since_last_save` of a Redis server (INFO persistence): the
 * number of writes since the last RDB save, which never happens on a server
 * started with `--save ""` as the test helpers start it.
 */
export function redisWriteCounter(redis: Redis): WriteCounter {
  return async () => /rdb_changes_since_last_save:(\d+)/.exec(await redis.info("persistence"))?.[1] ?? "?";
}
