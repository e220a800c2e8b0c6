import type { Backend } from "../storage/backend.js";
import { FollowHub, type FollowerGauges, type FollowLimits } from "./follow-hub.js";
import { RedisEventLogStore } from "./redis.js";
import { SqliteEventLogStore } from "./sqlite.js";
import type { EventLogStore } from "./store.js";
import { traceStore } from "../tracing/traced-store.js";

/**
 * Picks the EventLogStore implementation for the process's backend and
 * builds the process's one follow hub over it, moving `gauges` (open and
 * parked followers) when given (the store is traced when tracing is on:
 * tracing/traced-store.ts). `followPollIntervalMs` is the SQLite feed's
 * safety check interval (`--follow-poll-interval`; sqlite-feed.ts).
 */
export function openEventLog(backend: Backend, limits: FollowLimits & { followPollIntervalMs?: number }, gauges?: FollowerGauges): { store: EventLogStore; hub: FollowHub } {
  const opened =
    backend.kind === "sqlite" ? new SqliteEventLogStore(backend.db, limits.followPollIntervalMs) : new RedisEventLogStore(backend.redis, backend.keys, backend.storeTimeoutMs);
  const store = traceStore<EventLogStore>(opened, "EventLogStore", backend.kind);
  return { store, hub: new FollowHub(store, limits, gauges) };
}
