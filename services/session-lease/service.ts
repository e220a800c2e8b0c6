import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import { SessionLeaseService, type Lease } from "../../gen/mecatl/driver/v1/session_lease_pb.js";
import { requireId, requirePresent } from "../rpc/validate.js";
import type { LeaseLossReason } from "./rules.js";
import { leaseAnswer } from "./lease-answer.js";
import type { SessionLeaseStore } from "./store.js";

/** Longest accepted lease owner, in UTF-8 bytes (docs/DESIGN.md principle 5). */
export const MAX_OWNER_BYTES = 4096;

/**
 * Checks the `lease` of a Renew or Release request (section 4.3): present,
 * with a non-blank `session_id` and `owner`. Its `expiry` is not looked at.
 *
 * @throws ConnectError INVALID_ARGUMENT naming `lease`, `lease.session_id` or `lease.owner`.
 */
function requireLease(lease: Lease | undefined): { sessionId: string; owner: string; token: bigint } {
  const l = requirePresent("lease", lease);
  return { sessionId: requireId("lease.session_id", l.sessionId), owner: requireId("lease.owner", l.owner, MAX_OWNER_BYTES), token: l.token };
}

const LOSS: Record<LeaseLossReason, string> = {
  "no-lease": "nobody holds it (it was released or never granted)",
  "other-holder": "it now belongs to another owner or a later token",
  expired: "it expired before this renewal",
};

/** FAILED_PRECONDITION for a lease that another owner holds live; names the id, never the holder's token. */
function leaseHeld(sessionId: string): ConnectError {
  return new ConnectError(`the lease on session ${JSON.stringify(sessionId)} is held by another owner`, Code.FailedPrecondition);
}

/**
 * SessionLeaseService over a {@link SessionLeaseStore} (wire-contract.md
 * section 4). The server's `--lease-ttl` sets every expiry (now + TTL).
 *
 * - Acquire: the granted lease; FAILED_PRECONDITION while another owner holds
 *   it live; RESOURCE_EXHAUSTED if the id has used every uint64 token;
 *   INVALID_ARGUMENT for a blank `session_id` or `owner`.
 * - Renew: the same token with a new expiry; FAILED_PRECONDITION ("lease
 *   lost") when the caller's owner+token no longer hold a live lease;
 *   INVALID_ARGUMENT for a missing `lease` or blank `lease.session_id` /
 *   `lease.owner`. The request's `expiry` is ignored.
 * - Release: always OK (idempotent, drops only the caller's own hold), with
 *   the same INVALID_ARGUMENT checks as Renew.
 */
export function sessionLeaseService(store: SessionLeaseStore): ServiceImpl<typeof SessionLeaseService> {
  return {
    async acquire(req) {
      const sessionId = requireId("session_id", req.sessionId);
      const owner = requireId("owner", req.owner, MAX_OWNER_BYTES);
      const r = await store.acquire(sessionId, owner);
      if (r.outcome === "held") throw leaseHeld(sessionId);
      if (r.outcome === "exhausted") {
        throw new ConnectError(`session ${JSON.stringify(sessionId)} has used every fencing token (2^64 - 1); lease a new session id`, Code.ResourceExhausted);
      }
      return leaseAnswer(sessionId, r.hold);
    },
    async renew(req) {
      const { sessionId, owner, token } = requireLease(req.lease);
      const r = await store.renew(sessionId, owner, token);
      if (r.outcome === "lost") {
        throw new ConnectError(`the lease on session ${JSON.stringify(sessionId)} is lost: ${LOSS[r.why]}`, Code.FailedPrecondition);
      }
      return leaseAnswer(sessionId, r.hold);
    },
    async release(req) {
      const { sessionId, owner, token } = requireLease(req.lease);
      await store.release(sessionId, owner, token);
      return {};
    },
  };
}
