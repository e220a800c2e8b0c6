import { Code, ConnectError, createClient, type Client, type Transport } from "@connectrpc/connect";
import {
  SessionStoreService,
  type SessionMetadataEntry,
  type SessionLineageEntry,
  type SessionStoreCapabilitiesResponse,
} from "../gen/mecatl/driver/v1/session_store_pb.js";
import { unaryCall, deleteCall, requireText, type CallOptions } from "./call.js";
import {
  ContractMismatchError,
  InfrastructureError,
  InvalidDriverResponseError,
  InvalidRequestError,
  SessionAlreadyExistsError,
  SessionNotFoundError,
  UnsupportedError,
  classify,
} from "./errors.js";
import { instantToTimestamp, optionalNanos } from "./time.js";
import { checkMetadataPage, checkLineage, MAX_LINEAGE_RECORDS, type MetadataCursor } from "./session-store-checks.js";
import { isValidIncarnation } from "../common/incarnation.js";

/** The contract string a session store driver must announce (wire-contract.md section 2.4). */
export const SESSION_STORE_CONTRACT = "session-store/1";

/** The snapshot format the harness writes and the only one Load accepts (section 2.3). */
export const SNAPSHOT_FORMAT = "sessnap-json/1";

/** Deadline of the Capabilities probe made at construction, in milliseconds (section 2.4). */
export const CAPABILITY_PROBE_TIMEOUT_MS = 5_000;

const SERVICE = "SessionStoreService";

/** What the driver negotiated once at construction (section 2.4); authoritative for the client's life. */
export interface SessionStoreCapabilities {
  list: boolean;
  metadataPaging: boolean;
  delete: boolean;
  lineage: boolean;
  create: boolean;
  activityProjection: boolean;
  contract: string;
}

/** A stored snapshot: the harness's envelope, payload verbatim (one JSON line of the `sessnap` encoder). */
export interface StoredSnapshot {
  format: string;
  payload: Uint8Array;
}

/** One List row. `modifiedAt` is the save time in nanoseconds since the epoch; undefined when the driver left it unset (Go's zero time). */
export interface SessionEntry {
  sessionId: string;
  modifiedAt: bigint | undefined;
}

/** Content-free classification of a saved conversation (section 2.6); `""` is unknown. */
export type ActivityState = "" | "draft" | "active";

/** Options of Save and Create. */
export interface SaveOptions extends CallOptions {
  /** Sent only when the driver negotiated `activity_projection` (section 2.4). */
  activityState?: ActivityState;
}

/** A PageMetadata request (section 2.5). */
export interface MetadataPageRequest {
  /** Rows wanted, at least 1. */
  limit: number;
  cursor?: MetadataCursor;
  /** When set, only sessions owned by this issuer + subject are eligible. */
  owner?: { issuer: string; subject: string };
  ownershipEnforced?: boolean;
}

/** A checked PageMetadata answer. Rows' `activityState` is cleared unless activity projection was negotiated. */
export interface MetadataPage {
  sessions: SessionMetadataEntry[];
  nextCursor?: MetadataCursor;
  totalCount: number;
}

/** PageMetadata's cursor no longer matches the store or the owner filter (ABORTED, section 2.5): restart from the first page. */
export class MetadataCursorRestartError extends InfrastructureError {
  override name = "MetadataCursorRestartError";
}

/** A ReadLineage request (section 2.5). */
export interface LineageRequest {
  rootSessionId: string;
  rootIncarnation: string;
  /** 1 to {@link MAX_LINEAGE_RECORDS}. */
  limit: number;
  /** Exact-record selector; give both or neither. */
  record?: { sessionId: string; incarnation: string };
}

function notFoundAsSession(sessionId: string, operation: string) {
  return (err: ConnectError) => (err.code === Code.NotFound ? new SessionNotFoundError(sessionId, operation) : undefined);
}

/**
 * Decodes a Load payload enough to apply the harness's mis-keyed driver guard
 * (section 2.3): it must be a JSON object whose `id` is the requested session
 * id. The payload itself is not changed; callers decode it as they need.
 *
 * @returns what is wrong (not JSON, or another id), or undefined.
 */
function snapshotPayloadProblem(sessionId: string, payload: Uint8Array): string | undefined {
  let decoded: unknown;
  try {
    decoded = JSON.parse(Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength).toString("utf8"));
  } catch {
    return `snapshot payload of session ${JSON.stringify(sessionId)} is not JSON`;
  }
  const id = typeof decoded === "object" && decoded !== null ? (decoded as { id?: unknown }).id : undefined;
  return id === sessionId ? undefined : `asked for session ${JSON.stringify(sessionId)} but the snapshot is of ${JSON.stringify(id)}`;
}

/**
 * SessionStoreService client with the harness's semantics (wire-contract.md
 * sections 2.4 and 2.5). Create it with {@link SessionStoreClient.connect},
 * which negotiates Capabilities once and fails closed.
 *
 * Errors: {@link SessionNotFoundError} (Load NOT_FOUND, naming the id),
 * {@link SessionAlreadyExistsError} (Create ALREADY_EXISTS),
 * {@link UnsupportedError} (UNIMPLEMENTED, or a capability negotiated false:
 * then no RPC is sent), {@link InvalidDriverResponseError} (a snapshot in
 * another format or of another id), {@link InfrastructureError} (anything
 * else), the caller's abort reason on cancellation. Delete treats NOT_FOUND
 * as success.
 */
export class SessionStoreClient {
  private constructor(
    private readonly rpc: Client<typeof SessionStoreService>,
    /** The negotiated capabilities. */
    readonly capabilities: SessionStoreCapabilities,
  ) {}

  /**
   * Calls Capabilities once with a deadline of 5 s (or the caller's, if
   * sooner) and returns a client only when the contract is exactly
   * `session-store/1` (section 2.4).
   *
   * @throws ContractMismatchError for an empty or different contract (no
   *   further RPC is sent); {@link UnsupportedError} when Capabilities is
   *   UNIMPLEMENTED; {@link InfrastructureError} for any other status,
   *   including DEADLINE_EXCEEDED when the probe runs past 5 s; the caller's
   *   abort reason when its signal aborts first.
   */
  static async connect(transport: Transport, options: CallOptions & { probeTimeoutMs?: number } = {}): Promise<SessionStoreClient> {
    const rpc = createClient(SessionStoreService, transport);
    const operation = `${SERVICE}/Capabilities`;
    const probeMs = Math.min(options.probeTimeoutMs ?? CAPABILITY_PROBE_TIMEOUT_MS, options.timeoutMs ?? Infinity);
    let caps: SessionStoreCapabilitiesResponse;
    try {
      caps = await rpc.capabilities({}, { signal: options.signal, timeoutMs: probeMs });
    } catch (err) {
      const e = classify(err, operation, options.signal);
      if (e instanceof InfrastructureError && e.code === Code.DeadlineExceeded && options.timeoutMs === undefined) {
        throw new InfrastructureError(`session store capability probe got no answer within ${probeMs} ms`, operation, Code.DeadlineExceeded, undefined, { cause: err });
      }
      throw e;
    }
    if (caps.contract !== SESSION_STORE_CONTRACT) throw new ContractMismatchError(caps.contract, operation);
    const { list, metadataPaging, delete: del, lineage, create, activityProjection, contract } = caps;
    return new SessionStoreClient(rpc, { list, metadataPaging, delete: del, lineage, create, activityProjection, contract });
  }

  private activity(state: ActivityState | undefined): string {
    return this.capabilities.activityProjection ? (state ?? "") : "";
  }

  private static checkSave(operation: string, sessionId: string, payload: Uint8Array): void {
    requireText(operation, "session id", sessionId);
    if (!(payload instanceof Uint8Array) || payload.byteLength === 0) throw new InvalidRequestError("the snapshot payload must not be empty", operation);
  }

  /**
   * Stores `payload` (format `sessnap-json/1`) under `sessionId`, replacing
   * any earlier snapshot. The caller keeps the `id` inside the payload equal
   * to `sessionId` (section 2.3). Any failure is an infrastructure error.
   */
  async save(sessionId: string, payload: Uint8Array, options?: SaveOptions): Promise<void> {
    const operation = `${SERVICE}/Save`;
    SessionStoreClient.checkSave(operation, sessionId, payload);
    await unaryCall(operation, options, (o) =>
      this.rpc.save({ sessionId, snapshot: { format: SNAPSHOT_FORMAT, payload }, activityState: this.activity(options?.activityState) }, o),
    );
  }

  /**
   * Stores `payload` only if `sessionId` is absent, atomically (section 2.5).
   *
   * @throws SessionAlreadyExistsError when the id exists (nothing changed);
   *   UnsupportedError, without an RPC, when `create` was negotiated false.
   */
  async create(sessionId: string, payload: Uint8Array, options?: SaveOptions): Promise<void> {
    const operation = `${SERVICE}/Create`;
    SessionStoreClient.checkSave(operation, sessionId, payload);
    if (!this.capabilities.create) throw new UnsupportedError(operation, "the driver negotiated create=false", "create");
    await unaryCall(
      operation,
      options,
      (o) => this.rpc.create({ sessionId, snapshot: { format: SNAPSHOT_FORMAT, payload }, activityState: this.activity(options?.activityState) }, o),
      (err) => (err.code === Code.AlreadyExists ? new SessionAlreadyExistsError(sessionId, operation) : undefined),
    );
  }

  /**
   * The latest snapshot of `sessionId`, verbatim.
   *
   * @throws SessionNotFoundError naming the id on NOT_FOUND;
   *   InvalidDriverResponseError (never not-found) when the format is not
   *   `sessnap-json/1` (the message names it), the payload is not JSON, or it
   *   belongs to another session id.
   */
  async load(sessionId: string, options?: CallOptions): Promise<StoredSnapshot> {
    const snapshot = await this.loadUnchecked(sessionId, options);
    const problem = SessionStoreClient.snapshotProblem(sessionId, snapshot);
    if (problem !== undefined) throw new InvalidDriverResponseError(problem, `${SERVICE}/Load`);
    return snapshot;
  }

  /**
   * The latest snapshot of `sessionId` exactly as the driver answered it,
   * without the harness's format and mis-keyed-payload guards of
   * {@link load}: for operator tools that must show (or save) what is stored
   * even when the harness would refuse to load it.
   *
   * @throws SessionNotFoundError naming the id on NOT_FOUND;
   *   InvalidDriverResponseError when the answer holds no snapshot at all.
   */
  async loadUnchecked(sessionId: string, options?: CallOptions): Promise<StoredSnapshot> {
    const operation = `${SERVICE}/Load`;
    requireText(operation, "session id", sessionId);
    const res = await unaryCall(operation, options, (o) => this.rpc.load({ sessionId }, o), notFoundAsSession(sessionId, operation));
    if (res.snapshot === undefined) throw new InvalidDriverResponseError("no snapshot in the response", operation);
    return { format: res.snapshot.format, payload: res.snapshot.payload };
  }

  /**
   * Why {@link load} would refuse `snapshot` as the snapshot of `sessionId`
   * (the harness's guards of section 2.3), or undefined when it would not.
   */
  static snapshotProblem(sessionId: string, snapshot: StoredSnapshot): string | undefined {
    if (snapshot.format !== SNAPSHOT_FORMAT) return `snapshot of session ${JSON.stringify(sessionId)} has unknown format ${JSON.stringify(snapshot.format)}`;
    return snapshotPayloadProblem(sessionId, snapshot.payload);
  }

  /**
   * Every stored session id with its save time, in the driver's order.
   *
   * @throws UnsupportedError (capability `list`) without an RPC when `list`
   *   was negotiated false, or on UNIMPLEMENTED.
   */
  async list(options?: CallOptions): Promise<SessionEntry[]> {
    const operation = `${SERVICE}/List`;
    if (!this.capabilities.list) throw new UnsupportedError(operation, "the driver negotiated list=false", "list");
    const res = await unaryCall(operation, options, (o) => this.rpc.list({}, o));
    return res.sessions.map((s) => ({ sessionId: s.sessionId, modifiedAt: optionalNanos(s.modifiedAt) }));
  }

  /**
   * Deletes `sessionId`; idempotent, NOT_FOUND counts as success (section 2.5).
   *
   * @throws UnsupportedError (capability `delete`) without an RPC when
   *   `delete` was negotiated false, or on UNIMPLEMENTED.
   */
  async delete(sessionId: string, options?: CallOptions): Promise<void> {
    const operation = `${SERVICE}/Delete`;
    requireText(operation, "session id", sessionId);
    if (!this.capabilities.delete) throw new UnsupportedError(operation, "the driver negotiated delete=false", "delete");
    await deleteCall(operation, options, (o) => this.rpc.delete({ sessionId }, o));
  }

  /**
   * One page of session metadata (section 2.5), checked as the harness checks
   * it: at most `limit` rows, ordered by save time descending then id
   * byte-wise, all after the request cursor, and a fully bound `nextCursor`
   * on the last row.
   *
   * @throws UnsupportedError without an RPC when `metadata_paging` was
   *   negotiated false; InvalidRequestError for a limit below 1 or a
   *   partially bound cursor; MetadataCursorRestartError on ABORTED;
   *   InvalidDriverResponseError when the page breaks a rule.
   */
  async pageMetadata(req: MetadataPageRequest, options?: CallOptions): Promise<MetadataPage> {
    const operation = `${SERVICE}/PageMetadata`;
    if (!this.capabilities.metadataPaging) throw new UnsupportedError(operation, "the driver negotiated metadata_paging=false", "metadata_paging");
    if (!Number.isInteger(req.limit) || req.limit < 1 || req.limit > 2 ** 31 - 1) throw new InvalidRequestError("limit must be a whole number of at least 1", operation);
    const c = req.cursor;
    if (c !== undefined && (c.generation === "" || c.scope === "" || c.continuation === "" || c.sessionId === "")) {
      throw new InvalidRequestError("the cursor must carry session id, generation, scope and continuation", operation);
    }
    const res = await unaryCall(
      operation,
      options,
      (o) =>
        this.rpc.pageMetadata(
          {
            limit: req.limit,
            cursor: c === undefined ? undefined : { ...c, modifiedAt: instantToTimestamp(c.modifiedAt) },
            ownershipEnforced: req.ownershipEnforced ?? false,
            ownerIssuer: req.owner?.issuer ?? "",
            ownerSubject: req.owner?.subject ?? "",
          },
          o,
        ),
      (err) => (err.code === Code.Aborted ? new MetadataCursorRestartError(`the metadata cursor must restart: ${err.rawMessage}`, operation, err.code) : undefined),
    );
    const page = checkMetadataPage(req.limit, c, req.ownershipEnforced === true ? (req.owner ?? { issuer: "", subject: "" }) : undefined, res, operation);
    // The harness reads anything but draft or active as unknown, and every value as unknown without projection.
    for (const s of page.sessions) if (!this.capabilities.activityProjection || (s.activityState !== "draft" && s.activityState !== "active")) s.activityState = "";
    return page;
  }

  /**
   * Lineage records of a root session incarnation (section 2.5), checked for
   * size, state and owner-scope shape.
   *
   * @throws UnsupportedError without an RPC when `lineage` was negotiated
   *   false; InvalidRequestError for a bad limit or selector;
   *   InvalidDriverResponseError when the answer breaks a rule.
   */
  async readLineage(req: LineageRequest, options?: CallOptions): Promise<{ records: SessionLineageEntry[]; truncated: boolean }> {
    const operation = `${SERVICE}/ReadLineage`;
    if (!this.capabilities.lineage) throw new UnsupportedError(operation, "the driver negotiated lineage=false", "lineage");
    requireText(operation, "root session id", req.rootSessionId);
    if (!isValidIncarnation(req.rootIncarnation)) throw new InvalidRequestError(`root incarnation ${JSON.stringify(req.rootIncarnation)} is not a valid incarnation id`, operation);
    if (!Number.isInteger(req.limit) || req.limit < 1 || req.limit > MAX_LINEAGE_RECORDS) {
      throw new InvalidRequestError(`limit must be from 1 to ${MAX_LINEAGE_RECORDS}`, operation);
    }
    if (req.record !== undefined) {
      requireText(operation, "record session id", req.record.sessionId);
      if (!isValidIncarnation(req.record.incarnation)) throw new InvalidRequestError(`record incarnation ${JSON.stringify(req.record.incarnation)} is not a valid incarnation id`, operation);
      if (req.record.sessionId === req.rootSessionId) throw new InvalidRequestError("the record selector must name a session other than the root", operation);
    }
    const res = await unaryCall(operation, options, (o) =>
      this.rpc.readLineage(
        {
          rootSessionId: req.rootSessionId,
          rootIncarnation: req.rootIncarnation,
          limit: req.limit,
          recordSessionId: req.record?.sessionId ?? "",
          recordIncarnation: req.record?.incarnation ?? "",
        },
        o,
      ),
    );
    checkLineage(req, res.records, res.truncated, operation);
    return { records: res.records, truncated: res.truncated };
  }
}

export type { MetadataCursor };
