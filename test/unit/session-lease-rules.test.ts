import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { Redis } from "ioredis";
import {
  MAX_LEASE_TOKEN,
  decideAcquire,
  decideRelease,
  decideRenew,
  type LeaseClock,
  type LeaseDecision,
  type LeaseHold,
  type LeaseSlot,
} from "../../services/session-lease/rules.js";
import { LEASE_RULES_LUA } from "../../services/session-lease/lease-lua.js";
import { runScript } from "../../services/storage/redis-script.js";
import { spawnRedis, type SpawnedRedis } from "../helpers/redis-server.js";

/**
 * rules.ts is the specification of the lease rules; lease-lua.ts is its Lua
 * transcription that the Redis store runs. This file runs one table of
 * (slot, clock, request) cases through both, the Lua side on a real
 * redis-server, and requires the same decision (result and stored slot) for
 * every case, so the two cannot drift apart.
 */

type Request =
  | { op: "acquire"; owner: string }
  | { op: "renew"; owner: string; token: bigint }
  | { op: "release"; owner: string; token: bigint };

interface Case {
  slot: LeaseSlot;
  clock: LeaseClock;
  req: Request;
}

/** Runs the Lua rules on given inputs without touching any key; returns the flattened decision. */
const PROBE = {
  name: "mecatlLeaseRulesProbe",
  readOnly: true,
  lua: `${LEASE_RULES_LUA}
-- ARGV: op, ttl, owner, token, now, hold owner ('' = no hold), hold token, hold expiry, high water
local slot = {high = ARGV[9]}
if ARGV[6] ~= '' then slot.hold = {owner = ARGV[6], token = ARGV[7], expiry = tonumber(ARGV[8])} end
local result, nxt = lease_dispatch(ARGV[1], slot, tonumber(ARGV[5]), tonumber(ARGV[2]), ARGV[3], ARGV[4])
local out = lease_flat(result)
if nxt == nil then
  table.insert(out, 'unchanged')
elseif nxt.hold == nil then
  for _, v in ipairs({'write', '', '', '', nxt.high}) do table.insert(out, v) end
else
  for _, v in ipairs({'write', nxt.hold.owner, nxt.hold.token, string.format('%.0f', nxt.hold.expiry), nxt.high}) do table.insert(out, v) end
end
return out
`,
};

function decideTs(c: Case): LeaseDecision<{ outcome: string; why?: string; hold?: LeaseHold }> {
  switch (c.req.op) {
    case "acquire":
      return decideAcquire(c.slot, c.req.owner, c.clock);
    case "renew":
      return decideRenew(c.slot, c.req.owner, c.req.token, c.clock);
    case "release":
      return decideRelease(c.slot, c.req.owner, c.req.token);
  }
}

function flatTs(c: Case): string[] {
  const d = decideTs(c);
  const r = d.result;
  const out = [r.outcome, r.why ?? "", r.hold?.token.toString() ?? "", r.hold?.expiryUs.toString() ?? ""];
  if (d.next === undefined) return [...out, "unchanged"];
  const h = d.next.hold;
  return [...out, "write", h?.owner ?? "", h?.token.toString() ?? "", h?.expiryUs.toString() ?? "", d.next.highWater.toString()];
}

function luaArgs(c: Case): string[] {
  const h = c.slot.hold;
  const token = c.req.op === "acquire" ? "0" : c.req.token.toString();
  return [c.req.op, c.clock.ttlUs.toString(), c.req.owner, token, c.clock.nowUs.toString(), h?.owner ?? "", h?.token.toString() ?? "", h?.expiryUs.toString() ?? "", c.slot.highWater.toString()];
}

/** Every combination of hold, token range, clock and request the rules distinguish. */
function cases(): Case[] {
  const now = 1_800_000_000_123_456n;
  const ttls = [30_000_000n, 1_000n];
  const expiries = [now + 1n, now, now - 1n, now + 500n, now + 100_000_000n];
  // (hold token, high-water) pairs: small, decimal carries, around 2^53, at the top of uint64.
  const tokenPairs: Array<[bigint, bigint]> = [
    [1n, 1n],
    [5n, 7n],
    [9n, 9n],
    [99n, 199n],
    [(1n << 53n) - 1n, (1n << 53n) + 1n],
    [9_999_999_999_999_999_999n, 9_999_999_999_999_999_999n],
    [MAX_LEASE_TOKEN - 1n, MAX_LEASE_TOKEN - 1n],
    [MAX_LEASE_TOKEN, MAX_LEASE_TOKEN],
  ];
  const slots: LeaseSlot[] = [];
  for (const [token, highWater] of tokenPairs) {
    slots.push({ hold: undefined, highWater });
    for (const owner of ["A", "B"]) for (const expiryUs of expiries) slots.push({ hold: { owner, token, expiryUs }, highWater });
  }
  slots.push({ hold: undefined, highWater: 0n });
  const out: Case[] = [];
  for (const slot of slots) {
    const t = slot.hold?.token ?? 1n;
    const requests: Request[] = [
      { op: "acquire", owner: "A" },
      { op: "acquire", owner: "B" },
      { op: "renew", owner: "A", token: t },
      { op: "renew", owner: "A", token: t + 1n },
      { op: "renew", owner: "A", token: t - 1n },
      { op: "renew", owner: "B", token: t },
      { op: "release", owner: "A", token: t },
      { op: "release", owner: "A", token: t + 1n },
      { op: "release", owner: "B", token: t },
    ];
    for (const ttlUs of ttls) for (const req of requests) out.push({ slot, clock: { nowUs: now, ttlUs }, req });
  }
  return out;
}

describe("lease rules: rules.ts and the Lua transcription decide alike", () => {
  let redisServer: SpawnedRedis;
  let redis: Redis;

  beforeAll(async () => {
    redisServer = await spawnRedis();
    redis = redisServer.client();
  });
  afterAll(async () => {
    redis?.disconnect();
    await redisServer?.stop();
  });

  test("every case of the table gets the same result and stored slot from both", async () => {
    const table = cases();
    const lua = (await Promise.all(table.map((c) => runScript(redis, PROBE, [], luaArgs(c))))) as string[][];
    const mismatches = table.flatMap((c, i) => {
      const ts = flatTs(c);
      return JSON.stringify(ts) === JSON.stringify(lua[i]) ? [] : [{ case: luaArgs(c), ts, lua: lua[i] }];
    });
    expect(mismatches.slice(0, 5)).toEqual([]);
    // The table is only worth something if it reaches every outcome.
    const reached = new Set(table.map((c) => flatTs(c).slice(0, 2).join(":")));
    expect([...reached].sort()).toEqual(
      ["exhausted:", "granted:", "held:", "lost:expired", "lost:no-lease", "lost:other-holder", "not-held:", "released:"].sort(),
    );
  });
});

describe("lease rules: the decision table itself (wire-contract.md section 4.3)", () => {
  const clock = { nowUs: 1_000_000n, ttlUs: 30_000n };
  const hold = (owner: string, token: bigint, expiryUs: bigint): LeaseHold => ({ owner, token, expiryUs });

  test("a lease whose expiry equals now has expired: another owner takes it over", () => {
    const d = decideAcquire({ hold: hold("A", 3n, clock.nowUs), highWater: 3n }, "B", clock);
    expect(d.result).toEqual({ outcome: "granted", hold: hold("B", 4n, clock.nowUs + clock.ttlUs) });
    expect(d.next).toEqual({ hold: hold("B", 4n, clock.nowUs + clock.ttlUs), highWater: 4n });
  });

  test("a takeover counts from the high-water mark, not from the last hold", () => {
    const d = decideAcquire({ hold: undefined, highWater: 41n }, "A", clock);
    expect(d.result).toMatchObject({ outcome: "granted", hold: { token: 42n } });
  });

  test("a same-owner re-acquire and a renew keep the token and never shorten the expiry", () => {
    const far = clock.nowUs + 10n * clock.ttlUs;
    expect(decideAcquire({ hold: hold("A", 3n, far), highWater: 5n }, "A", clock).result).toEqual({ outcome: "granted", hold: hold("A", 3n, far) });
    const near = clock.nowUs + 1n;
    expect(decideRenew({ hold: hold("A", 3n, near), highWater: 5n }, "A", 3n, clock).result).toEqual({
      outcome: "granted",
      hold: hold("A", 3n, clock.nowUs + clock.ttlUs),
    });
  });

  test("Release keeps the high-water mark and clears only a matching hold", () => {
    expect(decideRelease({ hold: hold("A", 3n, 0n), highWater: 9n }, "A", 3n)).toEqual({ result: { outcome: "released" }, next: { hold: undefined, highWater: 9n } });
    expect(decideRelease({ hold: hold("A", 3n, 0n), highWater: 9n }, "A", 4n)).toEqual({ result: { outcome: "not-held" }, next: undefined });
  });

  test("the last uint64 token can be granted once; then the id is exhausted", () => {
    expect(decideAcquire({ hold: undefined, highWater: MAX_LEASE_TOKEN - 1n }, "A", clock).result).toMatchObject({ hold: { token: MAX_LEASE_TOKEN } });
    expect(decideAcquire({ hold: undefined, highWater: MAX_LEASE_TOKEN }, "A", clock)).toEqual({ result: { outcome: "exhausted" }, next: undefined });
  });
});
