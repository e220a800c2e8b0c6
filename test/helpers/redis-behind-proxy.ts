import { Code, ConnectError, type Client } from "@connectrpc/connect";
import { EventLogService } from "../../gen/mecatl/driver/v1/event_log_pb.js";
import { SessionLeaseService } from "../../gen/mecatl/driver/v1/session_lease_pb.js";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { ScheduleOneShotReArmerService, ScheduleStoreService } from "../../gen/mecatl/driver/v1/schedule_store_pb.js";
import { grpcClient } from "./clients.js";
import { startFaultProxy, type FaultProxy } from "./fault-proxy.js";
import { spawnRedis, type SpawnedRedis } from "./redis-server.js";
import { startServer, type ServerProcess } from "./server.js";
import { waitFor } from "./wait.js";
import { ev } from "./event-log.js";

/** Typed clients of every service of one `serve all` process. */
export interface AllClients {
  sessions: Client<typeof SessionStoreService>;
  events: Client<typeof EventLogService>;
  leases: Client<typeof SessionLeaseService>;
  schedules: Client<typeof ScheduleStoreService>;
  rearmer: Client<typeof ScheduleOneShotReArmerService>;
}

/** Clients of every service at `address`. */
export function allClients(address: string): AllClients {
  return {
    sessions: grpcClient(SessionStoreService, address),
    events: grpcClient(EventLogService, address),
    leases: grpcClient(SessionLeaseService, address),
    schedules: grpcClient(ScheduleStoreService, address),
    rearmer: grpcClient(ScheduleOneShotReArmerService, address),
  };
}

/** A real redis-server, a {@link FaultProxy} in front of it, and a `serve all` process that reaches Redis only through the proxy. */
export interface RedisBehindProxy {
  redis: SpawnedRedis;
  proxy: FaultProxy;
  server: ServerProcess;
  clients: AllClients;
  /** Stops the server, the proxy and Redis (removing its directory). */
  stop(): Promise<void>;
}

/**
 * Spawns redis-server (durable), starts a fault proxy to it, and starts
 * `serve all --store redis://<proxy> ...args` (pass e.g. `--store-timeout 2s`).
 */
export async function startRedisBehindProxy(args: string[] = []): Promise<RedisBehindProxy> {
  const redis = await spawnRedis();
  const proxy = await startFaultProxy(redis.port);
  const server = await startServer(["--store", `redis://${proxy.address}`, ...args]);
  return {
    redis,
    proxy,
    server,
    clients: allClients(server.address),
    async stop() {
      await server.stop();
      await proxy.close();
      await redis.stop();
    },
  };
}

/**
 * Waits (up to 15 s) until an Append to `probeSession` succeeds again
 * through `env`: the fault is gone and the server reconnected. Fails saying
 * the last UNAVAILABLE answer and the tail of the server's log; any other
 * error fails at once.
 */
export async function appendsSucceedAgain(env: RedisBehindProxy, probeSession: string): Promise<void> {
  let last = "";
  const append = () => env.clients.events.append({ sessionId: probeSession, event: ev({ n: 0 }) });
  try {
    await waitFor(
      () => append().then(
        () => true,
        (e: unknown) => (e instanceof ConnectError && e.code === Code.Unavailable ? ((last = e.rawMessage), false) : Promise.reject(e)),
      ),
      15_000,
      "appends to succeed again",
    );
  } catch (err) {
    throw new Error(`${(err as Error).message}; last answer: ${last}; server log tail:\n${env.server.stderr.slice(-15).join("\n")}`);
  }
}

/**
 * Runs `call` with the reply of its first Redis command that matches lost:
 * arms {@link FaultProxy.loseNextReply} for a chunk that is a script call
 * (`evalsha`, or `eval` for a script's first call on a new connection, as
 * ioredis writes them) containing every one of `markers`, runs
 * the call, and checks the fault really fired. Returns the call's result, or
 * its error as a rejection.
 *
 * @throws Error when no matching command went through the proxy.
 */
export async function withLostReply<T>(proxy: FaultProxy, markers: string[], call: () => Promise<T>): Promise<T> {
  let fired = false;
  void proxy.loseNextReply({ match: (chunk) => chunk.includes("\neval") && markers.every((m) => chunk.includes(m)) }).then(() => (fired = true));
  const outcome = await call().then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );
  // The proxy cuts the connection before the server can answer, so a fault that fired has been seen by now.
  if (!fired) {
    void proxy.loseNextReply({ match: () => false }); // disarm
    const got = "error" in outcome ? `it failed: ${String(outcome.error)}` : "it succeeded";
    throw new Error(`no Redis command containing ${JSON.stringify(markers)} went through the proxy (${got})`);
  }
  if ("error" in outcome) throw outcome.error;
  return outcome.value;
}
