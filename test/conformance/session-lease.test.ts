import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Code, type Client } from "@connectrpc/connect";
import Database from "better-sqlite3";
import { SessionLeaseService, type Lease } from "../../gen/mecatl/driver/v1/session_lease_pb.js";
import { conformanceBackends, DEFAULT_KEYS, rawRedis, type BackendSetup, type TestBackend } from "../helpers/backends.js";
import { execFileSync } from "node:child_process";
import { MAIN, runServeExpectingFailure, startServer, type ServerProcess } from "../helpers/server.js";
import { grpcClient } from "../helpers/clients.js";
import { expectCode } from "../helpers/errors.js";
import { timestampMillis, timestampNanos, waitPast, waitUntilBefore } from "../helpers/lease.js";

type LeaseClient = Client<typeof SessionLeaseService>;

const A = "owner-a";
const B = "owner-b";
const MAX_TOKEN = (1n << 64n) - 1n;

/** The Lease message as a Renew/Release request carries it. */
function held(lease: Lease | undefined): Lease {
  expect(lease, "response carries a lease").toBeDefined();
  return lease!;
}

describe.each(conformanceBackends())("SessionLeaseService on $name", (backend: TestBackend) => {
  let store: string;
  let setup: BackendSetup;
  let server: ServerProcess;
  let client: LeaseClient;
  /** A second server on the same store with a 1 s TTL, for the expiry cases (real waiting). */
  let short: ServerProcess;
  let shortClient: LeaseClient;

  beforeAll(async () => {
    setup = await backend.setup();
    store = setup.store;
    [server, short] = await Promise.all([
      startServer(["session-lease", "--store", store]),
      startServer(["session-lease", "--store", store, "--lease-ttl", "1s"]),
    ]);
    client = grpcClient(SessionLeaseService, server.address);
    shortClient = grpcClient(SessionLeaseService, short.address);
  });
  afterAll(async () => {
    await Promise.all([server?.stop(), short?.stop()]);
    await backend.teardown();
  });

  test("Acquire of a fresh id echoes id and owner, grants a token > 0 and expiry = now + 30 s by default (8.12 acquire fresh)", async () => {
    const before = Date.now();
    const lease = held((await client.acquire({ sessionId: "fresh", owner: A })).lease);
    const after = Date.now();
    expect(lease.sessionId).toBe("fresh");
    expect(lease.owner).toBe(A);
    expect(lease.token).toBeGreaterThan(0n);
    const expiry = timestampMillis(lease.expiry);
    expect(expiry).toBeGreaterThanOrEqual(before + 30_000 - 1);
    expect(expiry).toBeLessThanOrEqual(after + 30_000 + 1);
  });

  test("another owner's Acquire of a live lease is FAILED_PRECONDITION naming the id, not the token (8.12 double acquire)", async () => {
    const lease = held((await client.acquire({ sessionId: "double", owner: A })).lease);
    const err = await expectCode(client.acquire({ sessionId: "double", owner: B }), Code.FailedPrecondition, "double");
    expect(err.rawMessage).not.toContain(lease.token.toString());
    // The holder is untouched: it still renews with its token.
    expect(held((await client.renew({ lease })).lease).token).toBe(lease.token);
  });

  test("a same-owner re-acquire keeps the token and refreshes the expiry to now + TTL (8.12, 4.3)", async () => {
    const first = held((await client.acquire({ sessionId: "reacquire", owner: A })).lease);
    // Once the clock has passed the first grant (expiry - 30 s), now + TTL is strictly later.
    await waitUntilBefore(first.expiry, 30_000);
    const again = held((await client.acquire({ sessionId: "reacquire", owner: A })).lease);
    expect(again.token).toBe(first.token);
    expect(timestampNanos(again.expiry) > timestampNanos(first.expiry)).toBe(true);
  });

  test("Release frees the lease for another owner, whose token is the high-water mark + 1 (8.12 release, acquire after release, 4.3)", async () => {
    const a = held((await client.acquire({ sessionId: "release-frees", owner: A })).lease);
    await client.release({ lease: a });
    const b = held((await client.acquire({ sessionId: "release-frees", owner: B })).lease);
    expect(b.owner).toBe(B);
    expect(b.token).toBe(a.token + 1n);
  });

  test("Acquire by the same owner after its Release is a takeover with token high-water + 1 (4.3)", async () => {
    const a1 = held((await client.acquire({ sessionId: "release-same", owner: A })).lease);
    await client.release({ lease: a1 });
    const a2 = held((await client.acquire({ sessionId: "release-same", owner: A })).lease);
    expect(a2.token).toBe(a1.token + 1n);
  });

  test("Renew after Release is FAILED_PRECONDITION naming the id (8.12 renew after release)", async () => {
    const a = held((await client.acquire({ sessionId: "renew-released", owner: A })).lease);
    await client.release({ lease: a });
    await expectCode(client.renew({ lease: a }), Code.FailedPrecondition, "renew-released");
  });

  test("Release is idempotent: twice in a row, and for an unknown lease with token 1 (8.12)", async () => {
    const a = held((await client.acquire({ sessionId: "release-twice", owner: A })).lease);
    await client.release({ lease: a });
    await client.release({ lease: a });
    await client.release({ lease: { sessionId: "never-leased", owner: A, token: 1n } });
    // Releasing an unknown id records nothing: its first grant is still token 1.
    expect(held((await client.acquire({ sessionId: "never-leased", owner: B })).lease).token).toBe(1n);
  });

  test("Release with another owner or another token leaves the hold in place (4.3)", async () => {
    const a = held((await client.acquire({ sessionId: "release-foreign", owner: A })).lease);
    await client.release({ lease: { ...a, owner: B } });
    await client.release({ lease: { ...a, token: a.token + 1n } });
    await client.release({ lease: { ...a, token: a.token - 1n } });
    await expectCode(client.acquire({ sessionId: "release-foreign", owner: B }), Code.FailedPrecondition);
    expect(held((await client.renew({ lease: a })).lease).token).toBe(a.token);
  });

  test("Renew with another owner or another token is FAILED_PRECONDITION and leaves the hold in place (4.3)", async () => {
    const a = held((await client.acquire({ sessionId: "renew-foreign", owner: A })).lease);
    await expectCode(client.renew({ lease: { ...a, owner: B } }), Code.FailedPrecondition, "renew-foreign");
    await expectCode(client.renew({ lease: { ...a, token: a.token + 1n } }), Code.FailedPrecondition);
    await expectCode(client.renew({ lease: { ...a, token: 0n } }), Code.FailedPrecondition);
    expect(held((await client.renew({ lease: a })).lease).token).toBe(a.token);
  });

  test("tokens across A→B→A→B takeovers are 1, 2, 3, 4: high-water + 1 each time (8.12 token monotone, 4.3)", async () => {
    let previous = 0n;
    for (const owner of [A, B, A, B]) {
      const lease = held((await client.acquire({ sessionId: "monotone", owner })).lease);
      expect(lease.owner).toBe(owner);
      expect(lease.token).toBe(previous + 1n);
      previous = lease.token;
      await client.release({ lease });
    }
  });

  test("distinct session ids lease independently (8.12)", async () => {
    const s1 = held((await client.acquire({ sessionId: "indep-1", owner: A })).lease);
    const s2 = held((await client.acquire({ sessionId: "indep-2", owner: B })).lease);
    expect(s2.owner).toBe(B);
    await expectCode(client.acquire({ sessionId: "indep-1", owner: B }), Code.FailedPrecondition);
    await expectCode(client.acquire({ sessionId: "indep-2", owner: A }), Code.FailedPrecondition);
    await client.release({ lease: s1 });
    await expectCode(client.acquire({ sessionId: "indep-2", owner: A }), Code.FailedPrecondition);
    expect(held((await client.renew({ lease: s2 })).lease).token).toBe(s2.token);
  });

  test("Renew ignores the request's expiry: missing, zero or far future all match (4.3)", async () => {
    const a = held((await client.acquire({ sessionId: "expiry-ignored", owner: A })).lease);
    const bare = { sessionId: a.sessionId, owner: a.owner, token: a.token };
    expect(held((await client.renew({ lease: bare })).lease).token).toBe(a.token);
    expect(held((await client.renew({ lease: { ...bare, expiry: { seconds: 0n, nanos: 0 } } })).lease).token).toBe(a.token);
    const renewed = held((await client.renew({ lease: { ...bare, expiry: { seconds: 9_000_000_000n, nanos: 0 } } })).lease);
    expect(timestampMillis(renewed.expiry)).toBeLessThan(Date.now() + 60_000);
    await client.release({ lease: bare });
    await client.acquire({ sessionId: "expiry-ignored", owner: B });
  });

  test("the scheduler leader lease __scheduler__ behaves as an ordinary session id (4.3)", async () => {
    const leader = held((await client.acquire({ sessionId: "__scheduler__", owner: "replica-1" })).lease);
    await expectCode(client.acquire({ sessionId: "__scheduler__", owner: "replica-2" }), Code.FailedPrecondition, "__scheduler__");
    expect(held((await client.renew({ lease: leader })).lease).token).toBe(leader.token);
    await client.release({ lease: leader });
    const next = held((await client.acquire({ sessionId: "__scheduler__", owner: "replica-2" })).lease);
    expect(next.token).toBe(leader.token + 1n);
    await expectCode(client.renew({ lease: leader }), Code.FailedPrecondition);
  });

  test("odd ids (unicode, braces, 16 KiB) lease independently of their look-alikes", async () => {
    const ids = ["é-🦀-{tag}-x", "é-🦀-{tag}-y", "{", "}", "a}b{c", "z".repeat(16 * 1024)];
    const leases = [];
    for (const id of ids) leases.push(held((await client.acquire({ sessionId: id, owner: A })).lease));
    for (const [i, id] of ids.entries()) {
      expect(leases[i]!.sessionId).toBe(id);
      expect(leases[i]!.token).toBe(1n);
      await expectCode(client.acquire({ sessionId: id, owner: B }), Code.FailedPrecondition);
    }
  });

  const badAcquires: Array<[string, { sessionId: string; owner: string }, string]> = [
    ["blank session_id", { sessionId: "", owner: A }, "session_id"],
    ["whitespace session_id", { sessionId: " \t", owner: A }, "session_id"],
    ["blank owner", { sessionId: "bad-acquire", owner: "" }, "owner"],
    ["whitespace owner", { sessionId: "bad-acquire", owner: "  " }, "owner"],
    ["session_id over 16 KiB", { sessionId: "s".repeat(16 * 1024 + 1), owner: A }, "session_id"],
    ["owner over 4 KiB", { sessionId: "bad-acquire", owner: "o".repeat(4097) }, "owner"],
  ];
  test.each(badAcquires)("Acquire rejects %s with INVALID_ARGUMENT naming the field (4.3)", async (_label, req, field) => {
    await expectCode(client.acquire(req), Code.InvalidArgument, field);
  });

  test("a rejected Acquire grants nothing: the id's first real grant is token 1", async () => {
    await expectCode(client.acquire({ sessionId: "bad-then-good", owner: "" }), Code.InvalidArgument);
    expect(held((await client.acquire({ sessionId: "bad-then-good", owner: B })).lease).token).toBe(1n);
  });

  const badLeases: Array<[string, Record<string, unknown>, string]> = [
    ["missing lease", {}, "lease"],
    ["blank lease.session_id", { lease: { sessionId: "", owner: A, token: 1n } }, "lease.session_id"],
    ["whitespace lease.session_id", { lease: { sessionId: "   ", owner: A, token: 1n } }, "lease.session_id"],
    ["blank lease.owner", { lease: { sessionId: "bad-lease", owner: "", token: 1n } }, "lease.owner"],
  ];
  test.each(badLeases)("Renew and Release reject %s with INVALID_ARGUMENT naming the field (4.3)", async (_label, req, field) => {
    await expectCode(client.renew(req as never), Code.InvalidArgument, field);
    await expectCode(client.release(req as never), Code.InvalidArgument, field);
  });

  describe.concurrent("with a 1 s TTL and real waiting", () => {
    test("the expiry is now + 1 s (--lease-ttl)", async () => {
      const before = Date.now();
      const lease = held((await shortClient.acquire({ sessionId: "ttl-1s", owner: A })).lease);
      const after = Date.now();
      expect(timestampMillis(lease.expiry)).toBeGreaterThanOrEqual(before + 1000 - 1);
      expect(timestampMillis(lease.expiry)).toBeLessThanOrEqual(after + 1000 + 1);
    });

    test("Renew at TTL/2 keeps the token and moves the expiry strictly later (8.12)", async () => {
      const lease = held((await shortClient.acquire({ sessionId: "renew-half", owner: A })).lease);
      await waitUntilBefore(lease.expiry, 500);
      const renewed = held((await shortClient.renew({ lease })).lease);
      expect(renewed.token).toBe(lease.token);
      expect(renewed.owner).toBe(A);
      expect(renewed.sessionId).toBe("renew-half");
      expect(timestampNanos(renewed.expiry) > timestampNanos(lease.expiry)).toBe(true);
    });

    test("a lease renewed every 400 ms stays held across several TTLs", async () => {
      const lease = held((await shortClient.acquire({ sessionId: "kept-alive", owner: A })).lease);
      let current = lease;
      for (let i = 0; i < 4; i++) {
        // 400 ms into each 1 s hold.
        await waitUntilBefore(current.expiry, 600);
        current = held((await shortClient.renew({ lease })).lease);
        expect(current.token).toBe(lease.token);
      }
      await expectCode(shortClient.acquire({ sessionId: "kept-alive", owner: B }), Code.FailedPrecondition);
    });

    test.each([
      ["another owner", B],
      ["the same owner", A],
    ])("after expiry %s's Acquire is a takeover with token high-water + 1; the former hold can neither Renew nor Release it (8.12, 4.3)", async (_label, taker) => {
      const id = `expired-takeover-${taker}`;
      const old = held((await shortClient.acquire({ sessionId: id, owner: A })).lease);
      await waitPast(old.expiry);
      const taken = held((await shortClient.acquire({ sessionId: id, owner: taker })).lease);
      expect(taken.owner).toBe(taker);
      expect(taken.token).toBe(old.token + 1n);
      await expectCode(shortClient.renew({ lease: old }), Code.FailedPrecondition, id);
      await shortClient.release({ lease: old });
      await expectCode(shortClient.acquire({ sessionId: id, owner: "owner-c" }), Code.FailedPrecondition);
    });

    test("Renew after a bare expiry (nobody took over) is FAILED_PRECONDITION, and Release still works (4.3)", async () => {
      const a = held((await shortClient.acquire({ sessionId: "expired-bare", owner: A })).lease);
      await waitPast(a.expiry);
      await expectCode(shortClient.renew({ lease: a }), Code.FailedPrecondition, "expired-bare");
      await shortClient.release({ lease: a });
      expect(held((await shortClient.acquire({ sessionId: "expired-bare", owner: B })).lease).token).toBe(a.token + 1n);
    });
  });

  test.runIf(backend.shared)("a granted lease and the token high-water survive SIGKILL of the server (4.3, DESIGN principle 1)", async () => {
    const first = await startServer(["session-lease", "--store", store]);
    const c1 = grpcClient(SessionLeaseService, first.address);
    const kept = held((await c1.acquire({ sessionId: "restart-held", owner: A })).lease);
    const freed = held((await c1.acquire({ sessionId: "restart-freed", owner: A })).lease);
    await c1.release({ lease: freed });
    await first.kill();
    const second = await startServer(["session-lease", "--store", store]);
    try {
      const c2 = grpcClient(SessionLeaseService, second.address);
      await expectCode(c2.acquire({ sessionId: "restart-held", owner: B }), Code.FailedPrecondition);
      expect(held((await c2.renew({ lease: kept })).lease).token).toBe(kept.token);
      expect(held((await c2.acquire({ sessionId: "restart-freed", owner: B })).lease).token).toBe(freed.token + 1n);
    } finally {
      await second.stop();
    }
  });

  test.runIf(backend.shared)("tokens use all of uint64 exactly, and an id past 2^64 - 1 is RESOURCE_EXHAUSTED", async () => {
    // White-box seed: put the id's high-water mark at 2^64 - 2 behind the server's back.
    const id = "near-max";
    const r = rawRedis(setup);
    if (r !== undefined) {
      await r.hset(DEFAULT_KEYS.lease(id), "high_water", (MAX_TOKEN - 1n).toString());
      r.disconnect();
    } else {
      const db = new Database(store.slice("sqlite:".length));
      db.prepare("INSERT INTO session_leases (session_id, high_water) VALUES (?, ?)").run(id, BigInt.asIntN(64, MAX_TOKEN - 1n));
      db.close();
    }
    const top = held((await client.acquire({ sessionId: id, owner: A })).lease);
    expect(top.token).toBe(MAX_TOKEN);
    expect(held((await client.renew({ lease: top })).lease).token).toBe(MAX_TOKEN);
    await client.release({ lease: top });
    await expectCode(client.acquire({ sessionId: id, owner: B }), Code.ResourceExhausted, id);
  });
});

describe("the --lease-ttl flag", () => {
  test("--help shows the defaults as durations: --lease-ttl 30s, --shutdown-grace 10s", () => {
    const help = execFileSync(process.execPath, [MAIN, "serve", "--help"], { encoding: "utf8" }).replace(/\s+/g, " ");
    expect(help).toMatch(/--lease-ttl <duration> [^-]*\(default: 30s\)/);
    expect(help).toMatch(/--shutdown-grace <duration> [^-]*\(default: 10s\)/);
  });

  test.each([["0s"], ["99ms"], ["soon"], ["400d"]])("--lease-ttl %s is refused at start, naming the flag", async (value) => {
    const { code, stderr } = await runServeExpectingFailure(["session-lease", "--store", "sqlite::memory:", "--lease-ttl", value]);
    expect(code).not.toBe(0);
    expect(stderr).toContain("--lease-ttl");
  });
});
