import type { Backend } from "../storage/backend.js";
import { RedisSessionStore } from "./redis.js";
import { SqliteSessionStore } from "./sqlite.js";
import type { SessionStore } from "./store.js";

/** Picks the SessionStore implementation for the process's backend. */
export function openSessionStore(backend: Backend): SessionStore {
  return backend.kind === "sqlite" ? new SqliteSessionStore(backend.db) : new RedisSessionStore(backend.redis, backend.keys, backend.storeTimeoutMs);
}
