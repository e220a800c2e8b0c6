import { Command } from "commander";
import { readFileSync } from "node:fs";
import { formatNanos } from "../time.js";
import { forEachId, leafCommand, parseCount, withClients, type CommonFlags } from "./common.js";
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
  let bytes: Buffer;
  try {
    bytes = readFileSync(file === "-" ? 0 : file);
  } catch (err) {
    throw new UsageError(`cannot read --file ${file}: ${(err as Error).message}`);
  }
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
 * `mecatl-drivers sessions list|get|save|create|delete`: the session store
 * as an operator sees it (wire-contract.md section 2).
 */
export function sessionsCommand(): Command {
  const sessions = new Command("sessions").description("list, show and delete stored session snapshots (SessionStoreService)");

  sessions.addCommand(
    leafCommand("list", "list stored sessions, most recently saved first", "session-store")
      .option("--limit <n>", "show only the n most recently saved (0: all)", parseCount, 0)
      .action(
        action(async (flags: CommonFlags & { limit: number }) => {
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
      .action(action((ids: string[], flags: CommonFlags) => forEachId(ids, flags, "session-store", "deleted", (c, id) => c.sessionStore!.delete(id)))),
  );
  return sessions;
}
