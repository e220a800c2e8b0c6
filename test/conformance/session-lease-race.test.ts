import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Code, ConnectError, type Client } from "@connectrpc/connect";
import { SessionLeaseService, type Lease } from "../../gen/mecatl/driver/v1/session_lease_pb.js";
import { sharedConformanceBackends, type TestBackend } from "../helpers/backends.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { grpcClient } from "../helpers/clients.js";
import { expectCode } from "../helpers/errors.js";
import { waitPast } from "../helpers/lease.js";

type LeaseClient = Client<typeof SessionLeaseService>;

const OWNERS = 32;
const ROUNDS = 50;

/**
 * Races OWNERS Acquires for `sessionId`, owner i going through clients[i % 2]
 * (two server processes), and checks that exactly one is granted and every
 * other one is FAILED_PRECONDITION. Returns the granted lease.
 */
async function race(clients: LeaseClient[], sessionId: string, round: number): Promise<Lease> {
  const results = await Promise.allSettled(
    Array.from({ length: OWNERS }, (_, i) => clients[i % clients.length]!.acquire({ sessionId, owner: `racer-${round}-${i}` })),
  );
  const granted = results.flatMap((r) => (r.status === "fulfilled" ? [r.value.lease!] : []));
  expect(granted, `round ${round}: exactly one Acquire is granted`).toHaveLength(1);
  for (const r of results) {
    if (r.status === "rejected") expect(Code[(r.reason as ConnectError).code], `round ${round}`).toBe(Code[Code.FailedPrecondition]);
  }
  return granted[0]!;
}

describe.each(sharedConformanceBackends())("SessionLeaseService across two server processes on $name", (backend: TestBackend) => {
  let servers: ServerProcess[] = [];
  let clients: LeaseClient[];
  let shortClients: LeaseClient[];

  beforeAll(async () => {
    const { store } = await backend.setup();
    servers = await Promise.all([
      startServer(["session-lease", "--store", store]),
      startServer(["session-lease", "--store", store]),
      startServer(["session-lease", "--store", store, "--lease-ttl", "1s"]),
      startServer(["session-lease", "--store", store, "--lease-ttl", "1s"]),
    ]);
    clients = servers.slice(0, 2).map((s) => grpcClient(SessionLeaseService, s.address));
    shortClients = servers.slice(2).map((s) => grpcClient(SessionLeaseService, s.address));
  });
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop()));
    await backend.teardown();
  });

  test(`${OWNERS} owners race Acquire for one id: exactly one OK, the rest FAILED_PRECONDITION, ${ROUNDS} times; tokens only grow and a former owner's Renew fails`, async () => {
    const tokens: bigint[] = [];
    let previous: Lease | undefined;
    for (let round = 0; round < ROUNDS; round++) {
      const winner = await race(clients, "raced", round);
      if (previous !== undefined) {
        expect(winner.token, `round ${round}`).toBeGreaterThan(previous.token);
        // The previous winner released and was taken over: its Renew is "lease lost" on either process.
        await expectCode(clients[round % 2]!.renew({ lease: previous }), Code.FailedPrecondition, "raced");
      }
      tokens.push(winner.token);
      // The winner holds it against every other owner on both processes until it lets go.
      await expectCode(clients[(round + 1) % 2]!.acquire({ sessionId: "raced", owner: "late-comer" }), Code.FailedPrecondition);
      await clients[round % 2]!.release({ lease: winner });
      previous = winner;
    }
    expect(new Set(tokens).size).toBe(ROUNDS);
  });

  test(`${OWNERS} owners race to take over an expired lease: exactly one OK, and the former owner's Renew fails`, async () => {
    const holder = (await shortClients[0]!.acquire({ sessionId: "raced-expiry", owner: "holder" })).lease!;
    await waitPast(holder.expiry);
    const winner = await race(shortClients, "raced-expiry", 0);
    expect(winner.token).toBeGreaterThan(holder.token);
    await expectCode(shortClients[1]!.renew({ lease: holder }), Code.FailedPrecondition, "raced-expiry");
    await expectCode(shortClients[0]!.renew({ lease: holder }), Code.FailedPrecondition, "raced-expiry");
  });

  test("a Release racing 8 Acquires on the other process grants at most one of them, with a greater token", async () => {
    for (let round = 0; round < 20; round++) {
      const id = `release-vs-acquire-${round}`;
      const a = (await clients[0]!.acquire({ sessionId: id, owner: "A" })).lease!;
      const [, ...acquires] = await Promise.allSettled([
        clients[0]!.release({ lease: a }),
        ...Array.from({ length: 8 }, (_, i) => clients[1]!.acquire({ sessionId: id, owner: `B${i}` })),
      ]);
      const granted = acquires.flatMap((r) => (r.status === "fulfilled" ? [r.value.lease!] : []));
      expect(granted.length, `round ${round}`).toBeLessThanOrEqual(1);
      for (const r of acquires) if (r.status === "rejected") expect(Code[(r.reason as ConnectError).code]).toBe(Code[Code.FailedPrecondition]);
      const next = granted[0] ?? (await clients[1]!.acquire({ sessionId: id, owner: "C" })).lease!;
      expect(next.token).toBeGreaterThan(a.token);
      await expectCode(clients[0]!.renew({ lease: a }), Code.FailedPrecondition);
    }
  });
});
