import { Command } from "commander";
import { formatNanos } from "../time.js";
import { leafCommand, withClients, type CommonFlags } from "./common.js";
import { action, printFields, printJson, printTable } from "./output.js";

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
 * `mecatl-drivers sessions list|get|delete`: the session store as an
 * operator sees it (wire-contract.md section 2).
 */
export function sessionsCommand(): Command {
  const sessions = new Command("sessions").description("list, show and delete stored session snapshots (SessionStoreService)");

  sessions.addCommand(
    leafCommand("list", "list stored sessions, most recently saved first", "session-store").action(
      action(async (flags: CommonFlags) => {
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
  return sessions;
}
