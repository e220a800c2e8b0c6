/**
 * The three small calls of issue 11's table, as benchmark operations: Load
 * of a 1 KiB snapshot, lease Renew, and a small durable Append, against a
 * driver server (one plain grpc-js client per service), and the same
 * message shapes against the transport floor (bench/lib/floor-server.ts).
 *
 * The client does the same work for both: it sends request bytes encoded
 * before the run and keeps the answers as bytes, as the floor's client does,
 * so that throughput ÷ floor compares the servers rather than charging the
 * driver for the benchmark client's protobuf-es encode and decode (on 2
 * cores the client's CPU is taken from the server's). With
 * `BENCH_CLIENT_CODEC=protobuf` the driver's client encodes each request
 * and decodes each answer with protobuf-es instead (how the figures before
 * 2026-12-02 were made).
 */
import * as grpc from "@grpc/grpc-js";
import { create, toBinary, type DescMethod } from "@bufbuild/protobuf";
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
  if (process.env.BENCH_CLIENT_CODEC !== "protobuf") {
    // Renew ignores the request's expiry and keeps the token: each loop's request is the same bytes every time.
    const loads = Array.from({ length: SESSIONS }, (_, i) => encoded(SessionStoreService.method.load, { sessionId: `bench-${i}` }));
    const renews = held.map((lease) => encoded(SessionLeaseService.method.renew, { lease }));
    const appends = Array.from({ length: inFlight }, (_, w) => encoded(EventLogService.method.append, { sessionId: `log-${w}`, event }));
    return {
      "Load 1 KiB": (_w, i) => bytesUnary(store, SessionStoreService.method.load, loads[i % SESSIONS]!),
      Renew: (w) => bytesUnary(leases, SessionLeaseService.method.renew, renews[w]!),
      Append: (w) => bytesUnary(log, EventLogService.method.append, appends[w]!),
    };
  }
  return {
    "Load 1 KiB": (_w, i) => rawUnary(store, SessionStoreService.method.load, { sessionId: `bench-${i % SESSIONS}` }),
    Renew: async (w) => {
      held[w] = (await rawUnary(leases, SessionLeaseService.method.renew, { lease: held[w] })).lease!;
    },
    Append: (w) => rawUnary(log, EventLogService.method.append, { sessionId: `log-${w}`, event }),
  };
}

/** The wire bytes of a request to `method`. */
function encoded<M extends DescMethod>(method: M, init: Parameters<typeof create<M["input"]>>[1]): Buffer {
  return Buffer.from(toBinary(method.input, create(method.input, init)));
}

const asIs = (b: Buffer) => b;

/** Sends request bytes to a unary `method` of `client`'s server; resolves to the answer's bytes, or rejects with the call's error status. */
function bytesUnary(client: grpc.Client, method: DescMethod, request: Buffer): Promise<Buffer> {
  const path = `/${method.parent.typeName}/${method.name}`;
  return new Promise((resolve, reject) => client.makeUnaryRequest(path, asIs, asIs, request, (err, res) => (err ? reject(err) : resolve(res!))));
}

/** Size of a RenewRequest on the wire, roughly (a lease of a short session id and owner). */
const RENEW_REQUEST = 48;

/**
 * The same message shapes against the transport floor: `Source` for Load,
 * `Sink` for Append, and for Renew `Source` (the bare floor: a Renew's
 * request is as small as Source's) or, on the Redis floor, `Write` (a Renew
 * is a write: it stores its request's bytes before it answers).
 */
export function floorUnaryOps(floor: TransportFloor): Record<(typeof UNARY_CALLS)[number], Op> {
  return {
    "Load 1 KiB": () => floor.source(KiB),
    Renew: floor.stores ? () => floor.write(Buffer.alloc(RENEW_REQUEST, 0x63), SMALL_ANSWER) : () => floor.source(SMALL_ANSWER),
    Append: () => floor.sink(Buffer.alloc(220, 0x62)),
  };
}
