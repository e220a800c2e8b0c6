import type { Backend } from "../storage/backend.js";
import { RedisScheduleStore } from "./redis.js";
import { SqliteScheduleStore } from "./sqlite.js";
import type { ScheduleStore } from "./store.js";

/** Picks the ScheduleStore implementation for the process's backend. */
export function openScheduleStore(backend: Backend): ScheduleStore {
  return backend.kind === "sqlite" ? new SqliteScheduleStore(backend.db) : new RedisScheduleStore(backend.redis, backend.keys, backend.storeTimeoutMs);
}
