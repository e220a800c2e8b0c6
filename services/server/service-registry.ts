import type { DescService } from "@bufbuild/protobuf";
import type { Backend } from "../storage/backend.js";
import { StartupError } from "../storage/redis-connection.js";
import type { AnyServiceImpl } from "./grpc-adapter.js";
import type { Logger } from "./logger.js";
import type { Metrics } from "./metrics.js";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { sessionStoreService } from "../session-store/service.js";
import { openSessionStore } from "../session-store/open.js";
import { EventLogService } from "../../gen/mecatl/driver/v1/event_log_pb.js";
import { eventLogService } from "../event-log/service.js";
import { openEventLog } from "../event-log/open.js";
import { SessionLeaseService } from "../../gen/mecatl/driver/v1/session_lease_pb.js";
import { sessionLeaseService } from "../session-lease/service.js";
import { openSessionLeaseStore } from "../session-lease/open.js";
import { ScheduleOneShotReArmerService, ScheduleStoreService } from "../../gen/mecatl/driver/v1/schedule_store_pb.js";
import { scheduleReArmerService, scheduleStoreService } from "../schedule-store/service.js";
import { openScheduleStore } from "../schedule-store/open.js";

/** Names accepted by `serve [services...]`, besides `all`. */
export const SERVICE_NAMES = ["session-store", "event-log", "session-lease", "schedule-store"] as const;
export type ServiceName = (typeof SERVICE_NAMES)[number];

/** Settings services read, from `serve` flags. */
export interface ServiceSettings {
  /** Lease lifetime in milliseconds (`--lease-ttl`, default 30 s; wire-contract.md section 4.3). */
  leaseTtlMs: number;
  /** Most concurrent ReadAfter follow streams per process (`--max-followers`). */
  maxFollowers: number;
  /** Records a live follower may fall behind before it must keep reading (`--follow-buffer`). */
  followBuffer: number;
  /** Milliseconds a follower past `followBuffer` may read nothing before `follow_lagging` (`--follow-stall`). */
  followStallMs: number;
  /** Milliseconds between safety checks for other processes' appends on an SQLite store (`--follow-poll-interval`, default 1 s; issue 11). */
  followPollIntervalMs: number;
}

/** What a service module gets to build its implementations. */
export interface ServiceContext {
  backend: Backend;
  settings: ServiceSettings;
  logger: Logger;
  metrics: Metrics;
  /** Registers cleanup run at shutdown after the listeners stop and before the backend closes. */
  onClose(cleanup: () => void | Promise<void>): void;
}

/** One mounted gRPC service: its descriptor and implementation. */
export interface MountedService {
  desc: DescService;
  impl: AnyServiceImpl;
}

/** A deployable unit of `serve`: one or more gRPC services over the shared backend. */
export interface ServiceModule {
  name: ServiceName;
  /** Builds the implementations; called once at start, before the server listens (it may prepare its store first). */
  mount(ctx: ServiceContext): MountedService[] | Promise<MountedService[]>;
}

/**
 * Every service module this build can serve. `serve all` mounts each of them
 * on one port, as the harness expects when several `--*-url` flags point at
 * one address (wire-contract.md section 6).
 */
export const SERVICE_MODULES: readonly ServiceModule[] = [
  {
    name: "session-store",
    mount: async (ctx) => {
      const store = openSessionStore(ctx.backend);
      try {
        await store.open();
      } catch (err) {
        throw new StartupError(`cannot prepare the session store (${ctx.backend.description}): ${(err as Error).message}`);
      }
      return [{ desc: SessionStoreService, impl: sessionStoreService(store) }];
    },
  },
  {
    name: "event-log",
    mount: (ctx) => {
      const { store, hub } = openEventLog(ctx.backend, ctx.settings, { open: ctx.metrics.followers, parked: ctx.metrics.followersParked, parks: ctx.metrics.followerParks });
      ctx.onClose(() => store.feed.close());
      return [{ desc: EventLogService, impl: eventLogService(store, hub) }];
    },
  },
  {
    name: "session-lease",
    mount: (ctx) => [{ desc: SessionLeaseService, impl: sessionLeaseService(openSessionLeaseStore(ctx.backend, ctx.settings.leaseTtlMs)) }],
  },
  {
    name: "schedule-store",
    mount: (ctx) => {
      const store = openScheduleStore(ctx.backend);
      return [
        { desc: ScheduleStoreService, impl: scheduleStoreService(store) },
        { desc: ScheduleOneShotReArmerService, impl: scheduleReArmerService(store) },
      ];
    },
  },
];
