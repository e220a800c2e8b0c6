import { redisScript } from "../storage/redis-script.js";

/**
 * The lease rules of rules.ts transcribed into Lua, for the Redis store (a
 * TypeScript function cannot run inside Redis, and the rule must run there,
 * atomically, against the Redis server's clock). Same names, same order of
 * checks as rules.ts; keep the two in step. `test/unit/session-lease-rules.test.ts`
 * runs one table of cases through rules.ts and through this chunk on a real
 * redis-server and requires identical decisions.
 *
 * Representation inside Lua:
 * - a hold is `{owner = string, token = decimal string, expiry = number}` or
 *   nil; expiry is microseconds since the epoch, exact in a double because it
 *   stays far below 2^53 (rules.ts MAX_LEASE_TTL_MS);
 * - tokens stay decimal strings end to end (no sign, no leading zeros), so all
 *   of uint64 is exact: Lua doubles are exact only to 2^53. Tokens are only
 *   compared for equality, incremented with decimal carry, and compared with
 *   the maximum by length then digits;
 * - a slot is `{hold = hold or nil, high = decimal string}`;
 * - each `decide_*` returns `result, next`: result is
 *   `{outcome = ..., why = ..., hold = ...}` and next is the slot to store,
 *   or nil when nothing changes.
 *
 * `lease_dispatch(op, slot, now, ttl, owner, token)` picks the rule by name
 * (`acquire`, `renew`, `release`), and `lease_flat(result)` turns a result
 * into the reply `{outcome, why, token, expiry}` (empty strings when absent).
 */
export const LEASE_RULES_LUA = `
local MAX_TOKEN = '18446744073709551615'

local function next_token(s)
  local zeros = ''
  for i = #s, 1, -1 do
    local d = string.byte(s, i) - 48
    if d < 9 then return string.sub(s, 1, i - 1) .. string.char(d + 49) .. zeros end
    zeros = zeros .. '0'
  end
  return '1' .. zeros
end

local function at_max(s)
  return #s > #MAX_TOKEN or (#s == #MAX_TOKEN and s >= MAX_TOKEN)
end

local function is_live(hold, now)
  return hold ~= nil and now < hold.expiry
end

local function refreshed(hold, now, ttl)
  local expiry = now + ttl
  if hold.expiry > expiry then expiry = hold.expiry end
  return {owner = hold.owner, token = hold.token, expiry = expiry}
end

local function decide_acquire(slot, owner, now, ttl)
  local hold = slot.hold
  if is_live(hold, now) then
    if hold.owner ~= owner then return {outcome = 'held'}, nil end
    local kept = refreshed(hold, now, ttl)
    return {outcome = 'granted', hold = kept}, {hold = kept, high = slot.high}
  end
  if at_max(slot.high) then return {outcome = 'exhausted'}, nil end
  local token = next_token(slot.high)
  local taken = {owner = owner, token = token, expiry = now + ttl}
  return {outcome = 'granted', hold = taken}, {hold = taken, high = token}
end

local function decide_renew(slot, owner, token, now, ttl)
  local hold = slot.hold
  if hold == nil then return {outcome = 'lost', why = 'no-lease'}, nil end
  if hold.owner ~= owner or hold.token ~= token then return {outcome = 'lost', why = 'other-holder'}, nil end
  if not is_live(hold, now) then return {outcome = 'lost', why = 'expired'}, nil end
  local kept = refreshed(hold, now, ttl)
  return {outcome = 'granted', hold = kept}, {hold = kept, high = slot.high}
end

local function decide_release(slot, owner, token)
  local hold = slot.hold
  if hold == nil or hold.owner ~= owner or hold.token ~= token then return {outcome = 'not-held'}, nil end
  return {outcome = 'released'}, {hold = nil, high = slot.high}
end

local function lease_dispatch(op, slot, now, ttl, owner, token)
  if op == 'acquire' then return decide_acquire(slot, owner, now, ttl) end
  if op == 'renew' then return decide_renew(slot, owner, token, now, ttl) end
  if op == 'release' then return decide_release(slot, owner, token) end
  error('unknown lease operation ' .. tostring(op))
end

local function lease_flat(result)
  local h = result.hold
  if h == nil then return {result.outcome, result.why or '', '', ''} end
  return {result.outcome, result.why or '', h.token, string.format('%.0f', h.expiry)}
end
`;

/**
 * Acquire, Renew or Release on one session id, atomically, at the Redis
 * server's clock (so replicas of the driver never disagree about expiry).
 *
 * KEYS[1] the session's lease hash: fields `owner`, `token` (decimal),
 *         `expiry_us` (decimal microseconds since the epoch) while held, and
 *         `high_water` (decimal, highest token ever granted) once granted.
 * ARGV[1] operation: `acquire`, `renew` or `release`.
 * ARGV[2] TTL in microseconds (decimal).
 * ARGV[3] owner.
 * ARGV[4] token of the caller's lease (decimal; ignored by acquire).
 *
 * A write script: also takes the operation record (redis-script.ts
 * `OP_RECORD_LUA`), so a retried Acquire, Renew or Release answers what the
 * first one decided instead of deciding again (a retried Acquire would
 * otherwise see its own grant, a retried Release "not-held").
 *
 * Returns `{outcome, why, token, expiry_us}` as strings: outcome is
 * `granted`, `held`, `exhausted`, `lost` (why = `no-lease`, `other-holder`
 * or `expired`), `released` or `not-held`; token and expiry_us are set for
 * `granted` only. Recorded when the lease hash changed (`granted`,
 * `released`); a refusal changes nothing and is not recorded.
 */
export const LEASE_SCRIPT = redisScript({
  name: "mecatlSessionLease",
  lua: `${LEASE_RULES_LUA}
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local f = redis.call('HMGET', KEYS[1], 'owner', 'token', 'expiry_us', 'high_water')
local slot = {high = f[4] or '0'}
if f[1] then slot.hold = {owner = f[1], token = f[2], expiry = tonumber(f[3])} end
local result, nxt = lease_dispatch(ARGV[1], slot, now, tonumber(ARGV[2]), ARGV[3], ARGV[4])
if nxt == nil then return lease_flat(result) end
if nxt.hold ~= nil then
  redis.call('HSET', KEYS[1], 'owner', nxt.hold.owner, 'token', nxt.hold.token,
    'expiry_us', string.format('%.0f', nxt.hold.expiry), 'high_water', nxt.high)
else
  redis.call('HDEL', KEYS[1], 'owner', 'token', 'expiry_us')
end
return op_done(lease_flat(result))
`,
});
