import type { Backend } from "../storage/backend.js";
import { FollowHub, type FollowerGauges, type FollowLimits } from "./follow-hub.js";
import { RedisEventLogStore } from "./redis.js";
import { SqliteEventLogStore } from "./sqlite.js";
import type { EventLogStore } from "./store.js";

/**
 * Picks the EventLogStore implementation for the process's backend and
 * builds the process's one follow hub over it, moving `gauges` (open and
 * parked followers) when given.
 */
export function openEventLog(backend: Backend, limits: FollowLimits, gauges?: FollowerGauges): { store: EventLogStore; hub: FollowHub } {
  const store = backend.kind === "sqlite" ? new SqliteEventLogStore(backend.db) : new RedisEventLogStore(backend.redis, backend.keys, backend.storeTimeoutMs);
  return { store, hub: new FollowHub(store, limits, gauges) };
}
