import type { RedisClient } from "../storage/redis-client.js";
import type { RedisKeys } from "../storage/redis-keys.js";
import { RedisOperations } from "../storage/redis-operation.js";
import { LEASE_SCRIPT } from "./lease-lua.js";
import type { AcquireResult, LeaseLossReason, ReleaseResult, RenewResult } from "./rules.js";
import type { SessionLeaseStore } from "./store.js";

type LeaseReply = [outcome: string, why: string, token: string, expiryUs: string];

/**
 * Turns the script's reply into a rule result; `owner` is the caller's (a
 * granted hold is always the caller's).
 *
 * @throws Error for a reply the script never produces (a different script
 *   version under the same name, for instance); the service answers INTERNAL.
 */
function parseReply(reply: unknown, owner: string): AcquireResult | RenewResult | ReleaseResult {
  const [outcome, why, token, expiryUs] = reply as LeaseReply;
  switch (outcome) {
    case "granted":
      return { outcome, hold: { owner, token: BigInt(token), expiryUs: BigInt(expiryUs) } };
    case "lost":
      return { outcome, why: why as LeaseLossReason };
    case "held":
    case "exhausted":
    case "released":
    case "not-held":
      return { outcome };
    default:
      throw new Error(`unexpected reply from the Redis lease script: ${JSON.stringify(reply)}`);
  }
}

/**
 * SessionLeaseStore on Redis: one hash per session id (hash-tagged, beside
 * the session's other keys) holding the current hold and the token
 * high-water mark. Every call is one run of {@link LEASE_SCRIPT}, which reads
 * the Redis server's clock with `TIME` and applies the Lua transcription of
 * rules.ts atomically, so every driver replica judges expiry by one clock.
 */
export class RedisSessionLeaseStore implements SessionLeaseStore {
  private readonly ttlArg: string;
  private readonly ops: RedisOperations;

  /**
   * @param ttlUs lease lifetime in microseconds.
   * @param storeTimeoutMs `--store-timeout` in milliseconds: each call is a
   *   bounded operation (storage/redis-operation.ts) with an operation record.
   */
  constructor(
    redis: RedisClient,
    private readonly keys: RedisKeys,
    ttlUs: bigint,
    storeTimeoutMs: number,
  ) {
    this.ttlArg = ttlUs.toString();
    this.ops = new RedisOperations(redis, storeTimeoutMs);
  }

  private async run(rule: "acquire" | "renew" | "release", sessionId: string, owner: string, token: bigint) {
    const op = this.ops.begin();
    const reply = await op.script(LEASE_SCRIPT, [this.keys.lease(sessionId)], [rule, this.ttlArg, owner, token.toString()], op.record(this.keys.sessionOp(sessionId, op.id)));
    return parseReply(reply, owner);
  }

  acquire(sessionId: string, owner: string): Promise<AcquireResult> {
    return this.run("acquire", sessionId, owner, 0n) as Promise<AcquireResult>;
  }

  renew(sessionId: string, owner: string, token: bigint): Promise<RenewResult> {
    return this.run("renew", sessionId, owner, token) as Promise<RenewResult>;
  }

  release(sessionId: string, owner: string, token: bigint): Promise<ReleaseResult> {
    return this.run("release", sessionId, owner, token) as Promise<ReleaseResult>;
  }
}
