import type { Backend } from "../storage/backend.js";
import { RedisScheduleStore } from "./redis.js";
import { SqliteScheduleStore } from "./sqlite.js";
import type { ScheduleStore } from "./store.js";
import { traceStore } from "../tracing/traced-store.js";

/** Picks the ScheduleStore implementation for the process's backend (traced when tracing is on: tracing/traced-store.ts). */
export function openScheduleStore(backend: Backend): ScheduleStore {
  const store = backend.kind === "sqlite" ? new SqliteScheduleStore(backend.db) : new RedisScheduleStore(backend.redis, backend.keys, backend.storeTimeoutMs);
  return traceStore<ScheduleStore>(store, "ScheduleStore", backend.kind);
}
