import type { Backend } from "../storage/backend.js";
import { RedisSessionLeaseStore } from "./redis.js";
import { SqliteSessionLeaseStore } from "./sqlite.js";
import { ttlMicros, type SessionLeaseStore } from "./store.js";
import { traceStore } from "../tracing/traced-store.js";

/**
 * Picks the SessionLeaseStore implementation for the process's backend
 * (traced when tracing is on: tracing/traced-store.ts).
 *
 * @param ttlMs lease lifetime in milliseconds (`--lease-ttl`).
 */
export function openSessionLeaseStore(backend: Backend, ttlMs: number): SessionLeaseStore {
  const ttlUs = ttlMicros(ttlMs);
  const store = backend.kind === "sqlite" ? new SqliteSessionLeaseStore(backend.db, ttlUs) : new RedisSessionLeaseStore(backend.redis, backend.keys, ttlUs, backend.storeTimeoutMs);
  return traceStore<SessionLeaseStore>(store, "SessionLeaseStore", backend.kind);
}
