import { beforeAll, describe, expect, test } from "vitest";
import { allBackends, type TestBackend } from "../helpers/backends.js";
import { serveDrivers } from "../helpers/driver-server.js";
import { clockPast } from "../helpers/wait.js";
import type { SessionLeaseClient } from "../../clients/session-lease-client.js";
import { LeaseHeldError } from "../../clients/errors.js";
import { InvalidRequestError } from "../../clients/errors.js";

const TTL_MS = 1500;

describe.each(allBackends())("SessionLeaseClient against a real server on $name (TTL 1.5 s)", (backend: TestBackend) => {
  const served = serveDrivers(backend, ["session-lease"], ["--lease-ttl", `${TTL_MS}ms`]);
  let leases: SessionLeaseClient;
  beforeAll(() => {
    leases = served.clients.sessionLease!;
  });

  test("acquire grants a positive token and an expiry about one TTL ahead (4.3)", async () => {
    const before = BigInt(Date.now() - 1000) * 1_000_000n;
    const lease = await leases.acquire("l-fresh", "owner-a");
    expect(lease).toMatchObject({ sessionId: "l-fresh", owner: "owner-a" });
    expect(lease.token > 0n).toBe(true);
    expect(lease.expiry > before + BigInt(TTL_MS) * 1_000_000n - 2_000_000_000n).toBe(true);
  });

  test("another owner gets LeaseHeldError; the same owner keeps its token (4.3)", async () => {
    const a = await leases.acquire("l-held", "owner-a");
    const err = await leases.acquire("l-held", "owner-b").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LeaseHeldError);
    expect((err as LeaseHeldError).sessionId).toBe("l-held");
    expect((await leases.acquire("l-held", "owner-a")).token).toBe(a.token);
  });

  test("renew keeps the token and moves the expiry forward (4.3)", async () => {
    const a = await leases.acquire("l-renew", "owner-a");
    // Once the clock has passed the grant (expiry - TTL), the renewed expiry is strictly later.
    await clockPast(a.expiry - BigInt(TTL_MS) * 1_000_000n);
    const renewed = await leases.renew(a);
    expect(renewed.token).toBe(a.token);
    expect(renewed.expiry > a.expiry).toBe(true);
  });

  test("release frees the lease for another owner with a greater token; renewing the released lease is held (4.3)", async () => {
    const a = await leases.acquire("l-release", "owner-a");
    await leases.release(a);
    await leases.release(a);
    const b = await leases.acquire("l-release", "owner-b");
    expect(b.token > a.token).toBe(true);
    await expect(leases.renew(a)).rejects.toBeInstanceOf(LeaseHeldError);
  });

  test("after expiry another owner takes over with a greater token and the old holder's renew fails (4.3)", async () => {
    const a = await leases.acquire("l-expire", "owner-a");
    await clockPast(a.expiry + 50_000_000n);
    const b = await leases.acquire("l-expire", "owner-b");
    expect(b.token > a.token).toBe(true);
    await expect(leases.renew(a)).rejects.toBeInstanceOf(LeaseHeldError);
  });

  test("release of an unknown lease is a no-op; blank ids never reach the wire (4.3)", async () => {
    await expect(leases.release({ sessionId: "l-never", owner: "nobody", token: 1n, expiry: 0n })).resolves.toBeUndefined();
    await expect(leases.acquire("", "o")).rejects.toBeInstanceOf(InvalidRequestError);
    await expect(leases.acquire("s", " ")).rejects.toBeInstanceOf(InvalidRequestError);
  });
});
