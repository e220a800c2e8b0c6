/**
 * The three small calls of issue 11's table, as benchmark operations: Load
 * of a 1 KiB snapshot, lease Renew, and a small durable Append, against a
 * driver server (one plain grpc-js client per service), and the same
 * message shapes against the transport floor (bench/lib/floor-server.ts).
 */
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { SessionLeaseService } from "../../gen/mecatl/driver/v1/session_lease_pb.js";
import { EventLogService } from "../../gen/mecatl/driver/v1/event_log_pb.js";
import { rawGrpcClient, rawUnary } from "../../test/helpers/raw-grpc.js";
import type { TransportFloor } from "./floor.js";

/** One benchmark operation: `worker` is the caller's loop (0 ..< in flight), `item` a running call number. */
export type Op = (worker: number, item: number) => Promise<unknown>;

/** The calls, in table order. */
export const UNARY_CALLS = ["Load 1 KiB", "Renew", "Append"] as const;

const KiB = 1024;
/** Size of a LeaseResponse and an AppendResponse on the wire, roughly: what the floor answers for them. */
const SMALL_ANSWER = 60;
/** Sessions seeded for Load. */
const SESSIONS = 1000;

/**
 * The driver's three calls against the server at `address`, after seeding
 * what they need: 1,000 sessions of 1 KiB, and one held lease per caller
 * loop (`inFlight` of them; each loop renews its own).
 */
export async function driverUnaryOps(address: string, inFlight: number): Promise<Record<(typeof UNARY_CALLS)[number], Op>> {
  const store = rawGrpcClient(SessionStoreService, address);
  const leases = rawGrpcClient(SessionLeaseService, address);
  const log = rawGrpcClient(EventLogService, address);
  for (let i = 0; i < SESSIONS; i++) {
    await rawUnary(store, SessionStoreService.method.save, { sessionId: `bench-${i}`, snapshot: { format: "sessnap-json/1", payload: Buffer.alloc(KiB, 0x61) } });
  }
  const held = await Promise.all(
    Array.from({ length: inFlight }, async (_, w) => (await rawUnary(leases, SessionLeaseService.method.acquire, { sessionId: `lease-${w}`, owner: `owner-${w}` })).lease!),
  );
  const event = { format: "eventlog-json/1", payload: Buffer.from(JSON.stringify({ type: "message", text: "x".repeat(160) })) };
  return {
    "Load 1 KiB": (_w, i) => rawUnary(store, SessionStoreService.method.load, { sessionId: `bench-${i % SESSIONS}` }),
    Renew: async (w) => {
      held[w] = (await rawUnary(leases, SessionLeaseService.method.renew, { lease: held[w] })).lease!;
    },
    Append: (w) => rawUnary(log, EventLogService.method.append, { sessionId: `log-${w}`, event }),
  };
}

/** The same message shapes against the transport floor: `Source` for Load and Renew, `Sink` for Append. */
export function floorUnaryOps(floor: TransportFloor): Record<(typeof UNARY_CALLS)[number], Op> {
  return {
    "Load 1 KiB": () => floor.source(KiB),
    Renew: () => floor.source(SMALL_ANSWER),
    Append: () => floor.sink(Buffer.alloc(220, 0x62)),
  };
}
