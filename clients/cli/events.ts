import { Command } from "commander";
import type { CursorRecord, EventLogClient } from "../event-log-client.js";
import { tailCursor } from "../event-log-tail.js";
import { followResuming } from "../event-log-resume.js";
import { idProblem } from "../../common/id-rules.js";
import { parseDurationOrZero } from "../../common/flag-parsers.js";
import { leafCommand, parseCount, readFileFlag, withClients, type CommonFlags } from "./common.js";
import { action, EXIT_FAILURE, EXIT_INTERRUPTED, printJsonLine, stdoutRoom, UsageError } from "./output.js";

interface ReadFlags extends CommonFlags {
  cursor?: string;
  limit?: number;
  follow?: boolean;
  /** Milliseconds a follow keeps trying to resume after an interruption; 0: it ends at the first. */
  resumeFor: number;
}

interface TailFlags extends ReadFlags {
  last: number;
}

/** The event's own type label, when its JSON names one (`type`, `Type`, `kind` or `Kind`). */
function eventType(payload: Uint8Array): string {
  try {
    const v = JSON.parse(Buffer.from(payload).toString("utf8")) as Record<string, unknown>;
    for (const k of ["type", "Type", "kind", "Kind"]) if (typeof v[k] === "string") return v[k] as string;
  } catch {
    // the client already refused payloads that are not JSON
  }
  return "-";
}

/**
 * Prints records as they arrive: one JSON line each with `--json`, otherwise
 * aligned columns `KIND LIVE BYTES TYPE CURSOR` (a header first). Every line
 * carries the record's cursor so a later `--cursor` resumes after it.
 */
class RecordPrinter {
  private header = false;
  last?: string;
  count = 0;

  constructor(private readonly json: boolean) {}

  print(r: CursorRecord): void {
    this.last = r.cursor;
    this.count++;
    if (this.json) {
      printJsonLine(r.kind === "event" ? { kind: r.kind, live: r.live, cursor: r.cursor, event: JSON.parse(Buffer.from(r.payload).toString("utf8")) } : { kind: r.kind, live: r.live, cursor: r.cursor, reason: r.reason });
      return;
    }
    if (!this.header) {
      process.stdout.write(`${"KIND".padEnd(5)}  ${"LIVE".padEnd(5)}  ${"BYTES".padStart(8)}  ${"TYPE".padEnd(20)}  CURSOR\n`);
      this.header = true;
    }
    const bytes = r.kind === "event" ? String(r.payload.byteLength) : "-";
    const type = r.kind === "event" ? eventType(r.payload) : `(${r.reason || "no reason"})`;
    process.stdout.write(`${r.kind.padEnd(5)}  ${String(r.live).padEnd(5)}  ${bytes.padStart(8)}  ${type.padEnd(20)}  ${r.cursor}\n`);
  }

  /** Tells a human how many records were printed and where to resume (stderr, so stdout stays parseable). */
  finish(): void {
    process.stderr.write(`${this.count} record(s)${this.last === undefined ? "" : `; resume with --cursor ${this.last}`}\n`);
  }
}

/** An AbortSignal that fires on SIGINT or SIGTERM, so a follow ends cleanly; `dispose` removes the handlers. */
function interruptSignal(): { signal: AbortSignal; dispose(): void } {
  const ac = new AbortController();
  const stop = () => ac.abort();
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
  return {
    signal: ac.signal,
    dispose: () => {
      process.off("SIGINT", stop);
      process.off("SIGTERM", stop);
    },
  };
}

/**
 * Streams records into `printer` until the log (or `--limit`) ends or, when
 * following, until SIGINT/SIGTERM; then prints the count. A follow the
 * server or the connection ends (a server restarting, `--max-connection-age`,
 * `follow_lagging`) is opened again after the last record printed, for up to
 * `--resume-for` (event-log-resume.ts), saying so on stderr. A read that fails prints the
 * count only when records came before the failure (where to resume), not a
 * "0 record(s)" before the error.
 */
async function readInto(log: EventLogClient, sessionId: string, flags: ReadFlags, cursor: string | undefined, printer: RecordPrinter): Promise<void> {
  const interrupt = interruptSignal();
  let failed = false;
  const onInterrupted = (err: Error, after: string, attempt: number) =>
    process.stderr.write(`mecatl-drivers: the follow was interrupted (${err.message}); following again after ${after === "" ? "the beginning" : `cursor ${after}`}${attempt > 1 ? ` (attempt ${attempt})` : ""}\n`);
  // A read that is not a follow cut short by Ctrl-C did not read the whole log: status 130, set at the interrupt itself,
  // so that it stands even when stdout's reader goes away before the read has wound down (a fresh-eyes run).
  if (flags.follow !== true) interrupt.signal.addEventListener("abort", () => (process.exitCode = EXIT_INTERRUPTED), { once: true });
  const options = { cursor, limit: flags.limit ?? 0, signal: interrupt.signal };
  const records = flags.follow === true ? followResuming(log, sessionId, { ...options, resumeForMs: flags.resumeFor, onInterrupted }) : log.readAfter(sessionId, options);
  try {
    for await (const r of records) {
      printer.print(r);
      await stdoutRoom(interrupt.signal);
    }
  } catch (err) {
    failed = true;
    throw err;
  } finally {
    interrupt.dispose();
    if (!failed || printer.count > 0) printer.finish();
  }
}

/**
 * For a driver whose cursors are not `cur/1` envelopes (so {@link tailCursor}
 * cannot position a read): reads the whole log, prints its last `last`
 * records, and returns the cursor after the log's last record (undefined for
 * an empty log).
 */
async function printLastByScanning(log: EventLogClient, sessionId: string, last: number, printer: RecordPrinter): Promise<string | undefined> {
  const recent: CursorRecord[] = [];
  let cursor: string | undefined;
  for await (const r of log.readAfter(sessionId)) {
    recent.push(r);
    if (recent.length > last) recent.shift();
    cursor = r.cursor;
  }
  for (const r of recent) printer.print(r);
  return cursor;
}

/** One event `events append` will send, and where it came from (for messages). */
interface EventToAppend {
  /** `the event argument`, or `--file F line N`. */
  where: string;
  text: string;
}

/**
 * Checks that `text` is one JSON object, as a harness event is
 * (wire-contract.md section 3.4: `eventlog-json/1`).
 *
 * @throws UsageError naming `where`, saying that nothing was appended.
 */
function checkedEvent(where: string, text: string): EventToAppend {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new UsageError(`${where} is not JSON (${(err as Error).message}); nothing was appended`);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new UsageError(`${where} is not a JSON object; nothing was appended`);
  return { where, text };
}

/**
 * Every non-blank line of `file` (`-` for stdin) as one event, each checked
 * before any is sent, so a bad line never leaves the ones before it appended.
 *
 * @throws UsageError (exit 2) naming the file and the first bad line (counted
 *   from 1, blank lines included), or when the file cannot be read or holds
 *   no event.
 */
function eventsOfFile(file: string): EventToAppend[] {
  const name = file === "-" ? "stdin" : `--file ${file}`;
  const events: EventToAppend[] = [];
  for (const [i, line] of readFileFlag("--file", file).toString("utf8").split("\n").entries()) {
    if (line.trim() !== "") events.push(checkedEvent(`${name} line ${i + 1}`, line));
  }
  if (events.length === 0) throw new UsageError(`${name} holds no event (one JSON object per line); nothing was appended`);
  return events;
}

function readOptions(cmd: Command): Command {
  return cmd
    .argument("<session-id>", "the session whose log to read")
    .option("--cursor <cursor>", "start strictly after this cursor (as printed by an earlier read)")
    .option("--limit <n>", "stop after this many records (gaps count); 0 = no limit", parseCount)
    .option("--resume-for <duration>", "when a follow is interrupted (the server restarts or shuts down, --max-connection-age cuts the connection, follow_lagging), read again after the last record printed, retrying for this long before giving up; 0 = end at the first interruption", parseDurationOrZero, 300_000);
}

/**
 * `mecatl-drivers events read|tail`: an operator's view of EventLogService
 * (wire-contract.md section 3.6).
 */
export function eventsCommand(): Command {
  const events = new Command("events").description("read and follow a session's event log (EventLogService)");

  events.addCommand(
    readOptions(leafCommand("read", "print a session's records from the beginning (or after --cursor), each with its cursor", "event-log"))
      .option("--follow", "keep the stream open and print new records as they are appended (Ctrl-C ends)")
      .action(
        action(async (sessionId: string, flags: ReadFlags) => {
          await withClients(flags, "event-log", (c) => readInto(c.eventLog!, sessionId, flags, flags.cursor, new RecordPrinter(flags.json ?? false)));
        }),
      ),
  );

  events.addCommand(
    readOptions(leafCommand("tail", "print the last records of a session's log, reading only the end of it, then follow new ones (or follow from --cursor); Ctrl-C ends and says how many records were printed", "event-log"))
      .option("--last <n>", "records already in the log to print first (ignored with --cursor)", parseCount, 10)
      .option("--no-follow", "print the last records (or, with --cursor, the records after it) and stop")
      .action(
        action(async (sessionId: string, flags: TailFlags) => {
          const printer = new RecordPrinter(flags.json ?? false);
          await withClients(flags, "event-log", async (c) => {
            const log = c.eventLog!;
            let start = flags.cursor;
            let fromTail = false;
            if (start === undefined) {
              start = await tailCursor(log, sessionId, flags.last);
              fromTail = start !== undefined;
              start ??= await printLastByScanning(log, sessionId, flags.last, printer);
            }
            if (flags.follow !== false) return readInto(log, sessionId, { ...flags, follow: true }, start, printer);
            if (fromTail && flags.last === 0) return printer.finish();
            await readInto(log, sessionId, { ...flags, follow: false, limit: fromTail ? flags.last : flags.limit }, start, printer);
          });
        }),
      ),
  );

  events.addCommand(
    leafCommand("append", "append events to a session's log: one JSON object as an argument, or one per line from --file; every one is checked before the first is sent; prints the cursor after the last", "event-log")
      .argument("<session-id>", "the session whose log to append to")
      .argument("[event]", "the event, a JSON object such as '{\"type\":\"note\",\"text\":\"hi\"}'")
      .option("--file <path>", "append every line of this file (- for stdin) as one event, in order; blank lines are skipped")
      .action(
        action(async (sessionId: string, event: string | undefined, flags: CommonFlags & { file?: string }) => {
          if ((event === undefined) === (flags.file === undefined)) throw new UsageError("give the event as an argument or --file, not both and not neither");
          const problem = idProblem(sessionId);
          if (problem !== undefined) throw new UsageError(`session id ${problem}; nothing was appended`);
          const events = event !== undefined ? [checkedEvent("the event argument", event)] : eventsOfFile(flags.file!);
          const cursors: string[] = [];
          let failure: { at: number; error: unknown } | undefined;
          await withClients(flags, "event-log", async (c) => {
            for (const [at, e] of events.entries()) {
              try {
                cursors.push(await c.eventLog!.append(sessionId, e.text));
              } catch (error) {
                // Later events are not sent: appending them would put them before the one that failed.
                failure = { at, error };
                break;
              }
            }
          });
          if (flags.json) for (const cursor of cursors) printJsonLine({ cursor });
          else if (cursors.length > 0) process.stdout.write(`appended ${cursors.length} event(s) to ${sessionId}; resume after them with --cursor ${cursors.at(-1)}\n`);
          if (failure === undefined) return;
          if (event !== undefined) throw failure.error;
          const { at, error } = failure;
          const rest = events.length - at - 1;
          process.stderr.write(
            `mecatl-drivers: ${events[at]!.where}: ${error instanceof Error ? error.message : String(error)}; ${cursors.length} of ${events.length} event(s) appended (the ones before it)${rest > 0 ? `; the ${rest} after it were not sent` : ""}\n`,
          );
          process.exitCode = EXIT_FAILURE;
        }),
      ),
  );
  return events;
}
