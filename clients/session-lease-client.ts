import { Code, createClient, type Client, type Transport } from "@connectrpc/connect";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { SessionLeaseService, type LeaseSchema, type LeaseResponse } from "../gen/mecatl/driver/v1/session_lease_pb.js";
import { unaryCall, requireText, type CallOptions } from "./call.js";
import { InvalidDriverResponseError, LeaseHeldError } from "./errors.js";
import { instantToTimestamp, optionalNanos } from "./time.js";

/** The lease id the harness's scheduler takes as its leader lock (wire-contract.md section 4.3). */
export const SCHEDULER_LEASE_ID = "__scheduler__";

const SERVICE = "SessionLeaseService";

/**
 * A granted lease. `token` is the fencing epoch, strictly increasing per
 * session id across takeovers; `expiry` is when the driver's clock ends it,
 * in nanoseconds since the epoch (the driver chooses the TTL, section 4.2).
 */
export interface Lease {
  sessionId: string;
  owner: string;
  token: bigint;
  expiry: bigint;
}

function toWire(lease: Lease): MessageInitShape<typeof LeaseSchema> {
  return { sessionId: lease.sessionId, owner: lease.owner, token: lease.token, expiry: instantToTimestamp(lease.expiry) };
}

/**
 * SessionLeaseService client with the harness's semantics (section 4.3).
 *
 * Errors: {@link LeaseHeldError} for FAILED_PRECONDITION on Acquire (another
 * owner holds it) and Renew (the lease was lost: expired, released or taken
 * over); {@link UnsupportedError} for UNIMPLEMENTED (the driver does not
 * lease); {@link InvalidDriverResponseError} when a granted lease is missing
 * or does not echo the session id and owner, or has no expiry;
 * {@link InfrastructureError} for anything else. Release is idempotent.
 */
export class SessionLeaseClient {
  private readonly rpc: Client<typeof SessionLeaseService>;

  constructor(transport: Transport) {
    this.rpc = createClient(SessionLeaseService, transport);
  }

  private static granted(res: LeaseResponse, sessionId: string, owner: string, operation: string): Lease {
    const l = res.lease;
    if (l === undefined) throw new InvalidDriverResponseError("no lease in the response", operation);
    if (l.sessionId !== sessionId || l.owner !== owner) {
      throw new InvalidDriverResponseError(`asked for ${JSON.stringify(sessionId)} as ${JSON.stringify(owner)}, granted ${JSON.stringify(l.sessionId)} to ${JSON.stringify(l.owner)}`, operation);
    }
    const expiry = optionalNanos(l.expiry);
    if (expiry === undefined || expiry === 0n) throw new InvalidDriverResponseError("the granted lease has no expiry", operation);
    return { sessionId: l.sessionId, owner: l.owner, token: l.token, expiry };
  }

  private static held(sessionId: string, operation: string) {
    return (err: { code: Code; rawMessage: string }) => (err.code === Code.FailedPrecondition ? new LeaseHeldError(sessionId, operation, err.rawMessage) : undefined);
  }

  /**
   * Takes the lease on `sessionId` for `owner`: a new token when it was free
   * or expired, the same token with a fresh expiry when `owner` already holds
   * it.
   *
   * @throws LeaseHeldError when another owner holds it.
   */
  async acquire(sessionId: string, owner: string, options?: CallOptions): Promise<Lease> {
    const operation = `${SERVICE}/Acquire`;
    requireText(operation, "session id", sessionId);
    requireText(operation, "owner", owner);
    const res = await unaryCall(operation, options, (o) => this.rpc.acquire({ sessionId, owner }, o), SessionLeaseClient.held(sessionId, operation));
    return SessionLeaseClient.granted(res, sessionId, owner, operation);
  }

  /**
   * Extends a lease this owner holds; same token, new expiry. The harness
   * renews every TTL/3.
   *
   * @throws LeaseHeldError when the lease was lost (stop the work it guards).
   */
  async renew(lease: Lease, options?: CallOptions): Promise<Lease> {
    const operation = `${SERVICE}/Renew`;
    requireText(operation, "session id", lease.sessionId);
    requireText(operation, "owner", lease.owner);
    const res = await unaryCall(operation, options, (o) => this.rpc.renew({ lease: toWire(lease) }, o), SessionLeaseClient.held(lease.sessionId, operation));
    return SessionLeaseClient.granted(res, lease.sessionId, lease.owner, operation);
  }

  /** Gives the lease up if owner and token still match; otherwise nothing happens. Never fails for an unknown lease. */
  async release(lease: Lease, options?: CallOptions): Promise<void> {
    const operation = `${SERVICE}/Release`;
    requireText(operation, "session id", lease.sessionId);
    requireText(operation, "owner", lease.owner);
    await unaryCall(operation, options, (o) => this.rpc.release({ lease: toWire(lease) }, o));
  }
}
