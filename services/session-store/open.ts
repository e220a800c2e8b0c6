import type { Backend } from "../storage/backend.js";
import { RedisSessionStore } from "./redis.js";
import { SqliteSessionStore } from "./sqlite.js";
import type { SessionStore } from "./store.js";
import { traceStore } from "../tracing/traced-store.js";

/** Picks the SessionStore implementation for the process's backend (traced when tracing is on: tracing/traced-store.ts). */
export function openSessionStore(backend: Backend): SessionStore {
  const store = backend.kind === "sqlite" ? new SqliteSessionStore(backend.db) : new RedisSessionStore(backend.redis, backend.keys, backend.storeTimeoutMs);
  return traceStore<SessionStore>(store, "SessionStore", backend.kind);
}
