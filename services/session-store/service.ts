import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { SessionStoreService, StoredSessionEntrySchema, type SaveRequest, type StoredSessionEntry } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { collectAnswer } from "../rpc/answer-budget.js";
import { mapEntries } from "../storage/index-scan.js";
import { invalidArgument, notFound } from "../rpc/errors.js";
import { requireFormat, requireId, requireNonEmptyBytes, requirePresent } from "../rpc/validate.js";
import { microsToTimestamp } from "../rpc/timestamp.js";
import { delimitedFieldBytes, HARNESS_MESSAGE_BYTES, timestampBytes } from "../rpc/message-size.js";
import type { SessionStore, StoredSnapshot } from "./store.js";

/** The contract string the harness requires from Capabilities (wire-contract.md section 2.4). */
export const SESSION_STORE_CONTRACT = "session-store/1";

/** The only snapshot format the Go harness writes (wire-contract.md section 2.3). */
export const SNAPSHOT_FORMAT = "sessnap-json/1";

function validSave(req: SaveRequest): { sessionId: string; snapshot: StoredSnapshot } {
  const sessionId = requireId("session_id", req.sessionId);
  const snapshot = requirePresent("snapshot", req.snapshot);
  requireFormat("snapshot.format", snapshot.format, [SNAPSHOT_FORMAT]);
  requireNonEmptyBytes("snapshot.payload", snapshot.payload);
  // Load answers {snapshot {format, payload}}; it must fit the harness's 64 MiB limit.
  const formatBytes = delimitedFieldBytes(Buffer.byteLength(snapshot.format, "utf8"));
  if (delimitedFieldBytes(formatBytes + delimitedFieldBytes(snapshot.payload.byteLength)) > HARNESS_MESSAGE_BYTES) {
    throw invalidArgument("snapshot.payload", `${snapshot.payload.byteLength} bytes is too large: the Load answer would exceed the harness's ${HARNESS_MESSAGE_BYTES}-byte message limit`);
  }
  if (!["", "draft", "active"].includes(req.activityState)) {
    throw invalidArgument("activity_state", `must be "draft", "active" or empty, got ${JSON.stringify(req.activityState)}`);
  }
  return { sessionId, snapshot: { format: snapshot.format, payload: snapshot.payload } };
}

/**
 * Encoded size in bytes of a List entry (1 `session_id`, 2 `modified_at`),
 * computed without encoding it, for the answer budget (issue 10).
 */
export function storedSessionEntryBytes(e: StoredSessionEntry): number {
  const id = Buffer.byteLength(e.sessionId, "utf8");
  return (id === 0 ? 0 : delimitedFieldBytes(id)) + (e.modifiedAt === undefined ? 0 : delimitedFieldBytes(timestampBytes(e.modifiedAt)));
}

/**
 * SessionStoreService over a {@link SessionStore} (wire-contract.md section 2).
 *
 * - Save: upsert; INVALID_ARGUMENT for a blank `session_id`, missing
 *   `snapshot`, a format other than `sessnap-json/1`, an empty payload, or a
 *   payload whose Load answer would exceed 64 MiB (the harness's limit).
 * - Create: as Save, but ALREADY_EXISTS (nothing changed) when the id exists.
 * - Load: NOT_FOUND naming the id when absent.
 * - List: every id with its save time, read in bounded pages;
 *   RESOURCE_EXHAUSTED (naming the count and the limit) when the answer would
 *   exceed the harness's 64 MiB message limit (issue 10).
 * - Delete: idempotent; removes the session's event log in the same store too.
 * - Capabilities: contract `session-store/1`; list, delete, create.
 * - PageMetadata, ReadLineage: UNIMPLEMENTED (advertised false, section 2.4).
 */
export function sessionStoreService(store: SessionStore): ServiceImpl<typeof SessionStoreService> {
  return {
    async save(req) {
      const { sessionId, snapshot } = validSave(req);
      await store.save(sessionId, snapshot);
      return {};
    },
    async create(req) {
      const { sessionId, snapshot } = validSave(req);
      if (!(await store.create(sessionId, snapshot))) {
        throw new ConnectError(`session ${JSON.stringify(sessionId)} already exists`, Code.AlreadyExists);
      }
      return {};
    },
    async load(req) {
      const sessionId = requireId("session_id", req.sessionId);
      const snapshot = await store.load(sessionId);
      if (snapshot === undefined) throw notFound(`session ${JSON.stringify(sessionId)} not found`);
      return { snapshot };
    },
    async list(_req, context) {
      const scan = store.scan();
      const entries = mapEntries(scan, (r) => create(StoredSessionEntrySchema, { sessionId: r.sessionId, modifiedAt: microsToTimestamp(r.modifiedAtMicros) }));
      const sessions = await collectAnswer(entries, storedSessionEntryBytes, { rpc: "List", noun: "sessions", total: () => scan.total() }, context.signal);
      return { sessions };
    },
    async pageMetadata() {
      throw new ConnectError("PageMetadata is not supported by this driver (capability metadata_paging is false)", Code.Unimplemented);
    },
    async readLineage() {
      throw new ConnectError("ReadLineage is not supported by this driver (capability lineage is false)", Code.Unimplemented);
    },
    async delete(req) {
      await store.delete(requireId("session_id", req.sessionId));
      return {};
    },
    capabilities() {
      return {
        contract: SESSION_STORE_CONTRACT,
        list: true,
        delete: true,
        create: true,
        metadataPaging: false,
        lineage: false,
        activityProjection: false,
      };
    },
  };
}
