import { Command, InvalidArgumentError } from "commander";
import type { SessionLineageEntry, SessionMetadataEntry } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { formatNanos, optionalNanos } from "../time.js";
import { MetadataCursorRestartError, type MetadataCursor, type SessionStoreClient } from "../session-store-client.js";
import { MAX_LINEAGE_RECORDS } from "../session-store-checks.js";
import { incarnationOfSnapshot } from "../session-incarnation.js";
import { leafCommand, parseCount, withClients, type CommonFlags } from "./common.js";
import { action, printFields, printJson, printTable, UsageError } from "./output.js";

/** A few top-level facts of a `sessnap-json/1` payload worth showing an operator; absent keys are left out. */
function summary(snapshot: Record<string, unknown>): Array<[string, string | number | undefined]> {
  const text = (k: string) => (typeof snapshot[k] === "string" ? (snapshot[k] as string) : undefined);
  return [
    ["state", text("state")],
    ["kind", text("kind")],
    ["title", text("title")],
    ["model", text("model_id")],
    ["created at", text("created_at")],
    ["messages", Array.isArray(snapshot.messages) ? snapshot.messages.length : undefined],
  ];
}

/** How many times `sessions list` starts its walk again when the sessions change under it. */
const LIST_RESTARTS = 3;

/** Commander parser for a page size or lineage limit: a whole number ≥ 1. */
function parsePositive(text: string): number {
  const n = parseCount(text);
  if (n < 1) throw new InvalidArgumentError(`expected a whole number of at least 1, got ${JSON.stringify(text)}`);
  return n;
}

interface OwnerListFlags extends CommonFlags {
  ownerIssuer?: string;
  ownerSubject?: string;
  pageSize: number;
  limit?: number;
}

/**
 * Walks PageMetadata for one owner (wire-contract.md section 2.5), page by
 * page, up to `limit` rows; starts again from the first page when a cursor
 * must restart (the owner's sessions changed), at most {@link LIST_RESTARTS}
 * times.
 */
async function ownerRows(store: SessionStoreClient, flags: OwnerListFlags): Promise<{ rows: SessionMetadataEntry[]; total: number }> {
  const owner = { issuer: flags.ownerIssuer ?? "", subject: flags.ownerSubject ?? "" };
  for (let attempt = 0; ; attempt++) {
    const rows: SessionMetadataEntry[] = [];
    let cursor: MetadataCursor | undefined;
    let total = 0;
    try {
      do {
        const want = Math.min(flags.pageSize, (flags.limit ?? Infinity) - rows.length);
        const page = await store.pageMetadata({ limit: want, cursor, owner, ownershipEnforced: true });
        rows.push(...page.sessions);
        total = page.totalCount;
        cursor = page.nextCursor;
      } while (cursor !== undefined && rows.length < (flags.limit ?? Infinity));
      return { rows, total };
    } catch (err) {
      if (!(err instanceof MetadataCursorRestartError) || attempt >= LIST_RESTARTS) throw err;
    }
  }
}

function metadataJson(r: SessionMetadataEntry) {
  const at = optionalNanos(r.modifiedAt);
  const created = optionalNanos(r.createdAt);
  return {
    sessionId: r.sessionId,
    modifiedAt: at === undefined ? null : formatNanos(at),
    createdAt: created === undefined ? null : formatNanos(created),
    state: r.state,
    kind: r.kind,
    activity: r.activityState,
    title: r.title,
    turns: r.turns,
    modelId: r.modelId,
    owner: r.hasOwner ? { issuer: r.ownerIssuer, subject: r.ownerSubject, grantType: r.ownerGrantType, name: r.ownerName } : null,
    estimatedBytes: r.estimatedBytes,
  };
}

/** The relation a lineage record has to the root, as one word plus the related id. */
function relation(r: SessionLineageEntry, root: string): string {
  if (r.sessionId === root) return "root";
  if (r.parentSessionId === root) return `child of ${root}`;
  if (r.originSessionId === root) return `scheduled from ${root}`;
  if (r.debugTargetSessionId === root) return `debugging ${root}`;
  return "";
}

interface LineageFlags extends CommonFlags {
  incarnation?: string;
  limit: number;
  record?: string;
  recordIncarnation?: string;
}

/**
 * `mecatl-drivers sessions list|get|delete|lineage`: the session store as an
 * operator sees it (wire-contract.md section 2).
 */
export function sessionsCommand(): Command {
  const sessions = new Command("sessions").description("list, show and delete stored session snapshots (SessionStoreService)");

  sessions.addCommand(
    leafCommand("list", "list stored sessions, most recently saved first; with --owner-issuer/--owner-subject, one owner's sessions with their metadata (PageMetadata)", "session-store")
      .option("--owner-issuer <issuer>", "list only sessions of this owner (with --owner-subject), page by page")
      .option("--owner-subject <subject>", "list only sessions of this owner (with --owner-issuer), page by page")
      .option("--page-size <n>", "rows per PageMetadata call", parsePositive, 100)
      .option("--limit <n>", "print at most this many of the owner's sessions", parsePositive)
      .action(
        action(async (flags: OwnerListFlags) => {
          if (flags.ownerIssuer !== undefined || flags.ownerSubject !== undefined) {
            const { rows, total } = await withClients(flags, "session-store", (c) => ownerRows(c.sessionStore!, flags));
            if (flags.json) {
              printJson({ totalCount: total, sessions: rows.map(metadataJson) });
              return;
            }
            printTable(
              ["SESSION", "MODIFIED", "STATE", "KIND", "ACTIVITY", "TITLE"],
              rows.map((r) => [r.sessionId, metadataJson(r).modifiedAt ?? undefined, r.state, r.kind, r.activityState, r.title]),
            );
            process.stderr.write(`${rows.length} of ${total} sessions of this owner\n`);
            return;
          }
          if (flags.limit !== undefined) throw new UsageError("--limit applies to an owner's listing; give --owner-issuer and --owner-subject");
          const rows = await withClients(flags, "session-store", (c) => c.sessionStore!.list());
          rows.sort((a, b) => (a.modifiedAt === b.modifiedAt ? a.sessionId.localeCompare(b.sessionId) : (b.modifiedAt ?? 0n) > (a.modifiedAt ?? 0n) ? 1 : -1));
          if (flags.json) {
            printJson(rows.map((r) => ({ sessionId: r.sessionId, modifiedAt: r.modifiedAt === undefined ? null : formatNanos(r.modifiedAt) })));
            return;
          }
          printTable(["SESSION", "MODIFIED"], rows.map((r) => [r.sessionId, r.modifiedAt === undefined ? undefined : formatNanos(r.modifiedAt)]));
        }),
      ),
  );

  sessions.addCommand(
    leafCommand("get", "show one session's snapshot: a summary, --json for all of it, --payload for the raw bytes", "session-store")
      .argument("<session-id>", "the session to load")
      .option("--payload", "write the snapshot payload verbatim to stdout")
      .action(
        action(async (sessionId: string, flags: CommonFlags & { payload?: boolean }) => {
          const snap = await withClients(flags, "session-store", (c) => c.sessionStore!.load(sessionId));
          if (flags.payload) {
            process.stdout.write(snap.payload);
            return;
          }
          const decoded = JSON.parse(Buffer.from(snap.payload).toString("utf8")) as Record<string, unknown>;
          if (flags.json) {
            printJson({ sessionId, format: snap.format, bytes: snap.payload.byteLength, snapshot: decoded });
            return;
          }
          printFields([["session", sessionId], ["format", snap.format], ["bytes", snap.payload.byteLength], ...summary(decoded).filter(([, v]) => v !== undefined)]);
        }),
      ),
  );

  sessions.addCommand(
    leafCommand("delete", "delete sessions (idempotent: an unknown id is not an error)", "session-store")
      .argument("<session-id...>", "the sessions to delete")
      .action(
        action(async (ids: string[], flags: CommonFlags) => {
          await withClients(flags, "session-store", async (c) => {
            for (const id of ids) await c.sessionStore!.delete(id);
          });
          if (flags.json) printJson({ deleted: ids });
          else for (const id of ids) process.stdout.write(`deleted ${id}\n`);
        }),
      ),
  );
  sessions.addCommand(
    leafCommand("lineage", "show a session's lineage: its own records (tombstones included) and the sessions directly related to one incarnation (ReadLineage)", "session-store")
      .argument("<session-id>", "the root session")
      .option("--incarnation <id>", "the root incarnation (default: the one in the session's stored snapshot)")
      .option("--limit <n>", `most records, 1 to ${MAX_LINEAGE_RECORDS}`, parsePositive, MAX_LINEAGE_RECORDS)
      .option("--record <session-id>", "read only this related record (with --record-incarnation)")
      .option("--record-incarnation <id>", "the incarnation of the --record session")
      .action(
        action(async (root: string, flags: LineageFlags) => {
          if ((flags.record === undefined) !== (flags.recordIncarnation === undefined)) throw new UsageError("--record and --record-incarnation go together");
          const { records, truncated } = await withClients(flags, "session-store", async (c) => {
            const store = c.sessionStore!;
            const rootIncarnation = flags.incarnation ?? incarnationOfSnapshot(root, (await store.load(root)).payload);
            const record = flags.record === undefined ? undefined : { sessionId: flags.record, incarnation: flags.recordIncarnation! };
            return store.readLineage({ rootSessionId: root, rootIncarnation, limit: flags.limit, record });
          });
          const deleted = (r: SessionLineageEntry) => (r.deletedAt === undefined ? undefined : formatNanos(optionalNanos(r.deletedAt)!));
          if (flags.json) {
            printJson({ truncated, records: records.map((r) => ({ ...r, $typeName: undefined, deletedAt: deleted(r) ?? null, ownerScope: Buffer.from(r.ownerScope).toString("hex") })) });
            return;
          }
          printTable(
            ["SESSION", "INCARNATION", "KIND", "STATE", "DELETED", "RELATION", "OWNER SCOPE"],
            records.map((r) => [r.sessionId, r.incarnation, r.kind, r.state, deleted(r), relation(r, root), Buffer.from(r.ownerScope).toString("hex").slice(0, 16)]),
          );
          if (truncated) process.stderr.write(`more records exist; raise --limit (at most ${MAX_LINEAGE_RECORDS})\n`);
        }),
      ),
  );
  return sessions;
}
