import { Command, InvalidArgumentError } from "commander";
import type { SessionLineageEntry, SessionMetadataEntry } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { formatNanos, optionalNanos } from "../time.js";
import { MetadataCursorRestartError, SessionStoreClient, type MetadataCursor } from "../session-store-client.js";
import { MAX_LINEAGE_RECORDS } from "../session-store-checks.js";
import { SessionNotFoundError } from "../errors.js";
import { incarnationOfSnapshot } from "../session-incarnation.js";
import { forEachId, leafCommand, parseCount, readFileFlag, withClients, writeFileFlag, type CommonFlags } from "./common.js";
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

/** The payload decoded as a JSON object, or undefined when it is not one. */
function jsonObject(payload: Uint8Array): Record<string, unknown> | undefined {
  try {
    const v: unknown = JSON.parse(Buffer.from(payload).toString("utf8"));
    return typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
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
  /** Most rows to print; 0 for all. */
  limit: number;
}

/**
 * Reads a snapshot payload from `file` (`-` for stdin), byte for byte, and
 * checks it is a JSON object whose `id` is `sessionId`: the harness refuses to
 * load a snapshot whose id differs from the one it asked for
 * (wire-contract.md section 2.3), so such a save would only plant a session
 * nobody can load.
 *
 * @throws UsageError naming the file when it cannot be read, is not a JSON
 *   object, or carries another id.
 */
function snapshotFromFile(sessionId: string, file: string): Uint8Array {
  const bytes = readFileFlag("--file", file);
  let decoded: unknown;
  try {
    decoded = JSON.parse(bytes.toString("utf8"));
  } catch {
    throw new UsageError(`--file ${file} is not JSON; a snapshot is one sessnap-json/1 object, as \`sessions get SESSION --payload\` prints it`);
  }
  const id = typeof decoded === "object" && decoded !== null && !Array.isArray(decoded) ? (decoded as { id?: unknown }).id : undefined;
  if (id !== sessionId) {
    throw new UsageError(`the snapshot in --file ${file} has id ${JSON.stringify(id)}, not ${JSON.stringify(sessionId)}; the harness refuses a snapshot stored under another id`);
  }
  return bytes;
}

/**
 * Walks PageMetadata for one owner (wire-contract.md section 2.5), page by
 * page, up to `limit` rows; starts again from the first page when a cursor
 * must restart (the owner's sessions changed), at most {@link LIST_RESTARTS}
 * times.
 */
async function ownerRows(store: SessionStoreClient, flags: OwnerListFlags): Promise<{ rows: SessionMetadataEntry[]; total: number }> {
  const owner = { issuer: flags.ownerIssuer ?? "", subject: flags.ownerSubject ?? "" };
  const most = flags.limit > 0 ? flags.limit : Infinity;
  for (let attempt = 0; ; attempt++) {
    const rows: SessionMetadataEntry[] = [];
    let cursor: MetadataCursor | undefined;
    let total = 0;
    try {
      do {
        const want = Math.min(flags.pageSize, most - rows.length);
        const page = await store.pageMetadata({ limit: want, cursor, owner, ownershipEnforced: true });
        rows.push(...page.sessions);
        total = page.totalCount;
        cursor = page.nextCursor;
      } while (cursor !== undefined && rows.length < most);
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

/**
 * Adds to a Load NOT_FOUND of `sessions lineage` how to read the lineage of
 * a deleted session: its records outlive it (wire-contract.md section 2.5,
 * ReadLineage), but its incarnation must then be given.
 *
 * @throws always: `err`, or a SessionNotFoundError whose message carries the hint.
 */
function lineageHint(err: unknown): never {
  if (!(err instanceof SessionNotFoundError)) throw err;
  err.message += "; for a deleted session give its incarnation with --incarnation INC (shown as INCARNATION by `sessions lineage` of its parent or origin)";
  throw err;
}

interface LineageFlags extends CommonFlags {
  incarnation?: string;
  limit: number;
  record?: string;
  recordIncarnation?: string;
}

/**
 * `mecatl-drivers sessions list|get|save|create|delete|lineage`: the session
 * store as an operator sees it (wire-contract.md section 2).
 */
export function sessionsCommand(): Command {
  const sessions = new Command("sessions").description("list, show and delete stored session snapshots (SessionStoreService)");

  sessions.addCommand(
    leafCommand("list", "list stored sessions, most recently saved first; with --owner-issuer/--owner-subject, one owner's sessions with their metadata (PageMetadata)", "session-store")
      .option("--owner-issuer <issuer>", "list only sessions of this owner, page by page; requires --owner-subject")
      .option("--owner-subject <subject>", "list only sessions of this owner, page by page; requires --owner-issuer")
      .option("--page-size <n>", "rows per PageMetadata call", parsePositive, 100)
      .option("--limit <n>", "show only the n most recently saved (0: all)", parseCount, 0)
      .action(
        action(async (flags: OwnerListFlags) => {
          if ((flags.ownerIssuer === undefined) !== (flags.ownerSubject === undefined)) {
            throw new UsageError("--owner-issuer and --owner-subject go together: an owner is the pair (give \"\" for an empty part)");
          }
          if (flags.ownerIssuer !== undefined) {
            const { rows, total } = await withClients(flags, "session-store", (c) => ownerRows(c.sessionStore!, flags));
            if (flags.json) {
              printJson({ totalCount: total, sessions: rows.map(metadataJson) });
              return;
            }
            // The id goes last, as in the plain listing.
            printTable(
              ["MODIFIED", "STATE", "KIND", "ACTIVITY", "TITLE", "SESSION"],
              rows.map((r) => [metadataJson(r).modifiedAt ?? undefined, r.state, r.kind, r.activityState, r.title, r.sessionId]),
            );
            process.stderr.write(`${rows.length} of ${total} sessions of this owner\n`);
            return;
          }
          const all = await withClients(flags, "session-store", (c) => c.sessionStore!.list());
          all.sort((a, b) => (a.modifiedAt === b.modifiedAt ? a.sessionId.localeCompare(b.sessionId) : (b.modifiedAt ?? 0n) > (a.modifiedAt ?? 0n) ? 1 : -1));
          const rows = flags.limit > 0 ? all.slice(0, flags.limit) : all;
          if (flags.json) {
            printJson(rows.map((r) => ({ sessionId: r.sessionId, modifiedAt: r.modifiedAt === undefined ? null : formatNanos(r.modifiedAt) })));
            return;
          }
          // The id goes last: however long ids are, the fixed-width time column stays aligned and nothing wraps mid-row.
          printTable(["MODIFIED", "SESSION"], rows.map((r) => [r.modifiedAt === undefined ? undefined : formatNanos(r.modifiedAt), r.sessionId]));
          if (rows.length < all.length) process.stderr.write(`${rows.length} of ${all.length} sessions; --limit 0 shows all\n`);
        }),
      ),
  );

  sessions.addCommand(
    leafCommand("get", "show one session's snapshot: a summary, --json for all of it, --payload or --out for the stored bytes", "session-store")
      .argument("<session-id>", "the session to load")
      .option("--payload", "write the snapshot payload verbatim to stdout, whatever it holds")
      .option("--out <file>", "write the snapshot payload verbatim to this file (created or replaced) instead of showing it")
      .action(
        action(async (sessionId: string, flags: CommonFlags & { payload?: boolean; out?: string }) => {
          // Unchecked: an operator must see, and be able to save, even a payload the harness would refuse.
          const snap = await withClients(flags, "session-store", (c) => c.sessionStore!.loadUnchecked(sessionId));
          if (flags.out !== undefined) {
            writeFileFlag("--out", flags.out, snap.payload);
            process.stderr.write(`wrote ${snap.payload.byteLength} bytes of ${sessionId} to ${flags.out}\n`);
            return;
          }
          if (flags.payload) {
            process.stdout.write(snap.payload);
            return;
          }
          const problem = SessionStoreClient.snapshotProblem(sessionId, snap);
          const decoded = jsonObject(snap.payload);
          if (flags.json) printJson({ sessionId, format: snap.format, bytes: snap.payload.byteLength, snapshot: decoded ?? null, ...(problem === undefined ? {} : { problem }) });
          else printFields([["session", sessionId], ["format", snap.format], ["bytes", snap.payload.byteLength], ...(decoded === undefined ? [] : summary(decoded).filter(([, v]) => v !== undefined))]);
          if (problem !== undefined) process.stderr.write(`mecatl-drivers: the harness would refuse to load this snapshot: ${problem}; --payload or --out writes its bytes as stored\n`);
        }),
      ),
  );

  for (const [name, description] of [
    ["save", "store a snapshot from a file under a session id, replacing any earlier one (Save)"],
    ["create", "store a snapshot from a file only if the session does not exist yet (Create); fails with 'already exists' otherwise"],
  ] as const) {
    sessions.addCommand(
      leafCommand(name, description, "session-store")
        .argument("<session-id>", "the session to write; the snapshot's own id must be the same")
        .requiredOption("--file <path>", "the sessnap-json/1 payload (- for stdin), stored byte for byte, e.g. as `sessions get SESSION --payload` wrote it")
        .action(
          action(async (sessionId: string, flags: CommonFlags & { file: string }) => {
            const payload = snapshotFromFile(sessionId, flags.file);
            await withClients(flags, "session-store", (c) => (name === "save" ? c.sessionStore!.save(sessionId, payload) : c.sessionStore!.create(sessionId, payload)));
            if (flags.json) printJson({ [name === "save" ? "saved" : "created"]: { sessionId, bytes: payload.byteLength } });
            else process.stdout.write(`${name === "save" ? "saved" : "created"} ${sessionId} (${payload.byteLength} bytes)\n`);
          }),
        ),
    );
  }

  sessions.addCommand(
    leafCommand(
      "delete",
      "delete sessions: the snapshot and, when the event log is served from the same store, the session's event log too (its cursors expire); idempotent: an unknown id is not an error",
      "session-store",
    )
      .argument("<session-id...>", "the sessions to delete")
      .action(action((ids: string[], flags: CommonFlags) => forEachId(ids, flags, "session-store", { noun: "session id", verb: "deleted" }, (c, id) => c.sessionStore!.delete(id)))),
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
            const rootIncarnation = flags.incarnation ?? incarnationOfSnapshot(root, (await store.load(root).catch(lineageHint)).payload);
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
