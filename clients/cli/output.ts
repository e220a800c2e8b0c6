import { once } from "node:events";
import Table from "cli-table3";
import { DriverError } from "../errors.js";
import { DriverConfigError } from "../targets.js";
import { InvalidRequestError } from "../errors.js";

/** Exit status of a command that failed because of its flags or arguments. */
export const EXIT_USAGE = 2;

/** Exit status of a command the driver answered with an error (not found, held, unavailable...). */
export const EXIT_FAILURE = 1;

/** Exit status of a command Ctrl-C (SIGINT) cut short before it was done (128 + SIGINT, as shells report it). */
export const EXIT_INTERRUPTED = 130;

/** JSON text with bigints written as decimal strings and byte arrays as base64. */
export function toJson(value: unknown, indent?: number): string {
  return JSON.stringify(value, (_k, v: unknown) => (typeof v === "bigint" ? v.toString() : v instanceof Uint8Array ? Buffer.from(v).toString("base64") : v), indent);
}

/**
 * Ends the command quietly, with status 0 (or the status already set), when
 * the reader of stdout has gone (`mecatl-drivers events read S | head -1`),
 * as Unix tools do. Before, the EPIPE was an unhandled error with a stack
 * trace (fresh-eyes run).
 */
export function endQuietlyWhenStdoutCloses(): void {
  process.stdout.on("error", (err: NodeJS.ErrnoException) => {
    // A status already set stands: a read Ctrl-C cut short stays 130 when its reader then goes away.
    if (err.code === "EPIPE") process.exit(process.exitCode ?? 0);
    throw err;
  });
}

/**
 * Resolves once stdout has room again after a write that filled its buffer
 * (a reader slower than the records: a socket, or a pipe where writes are
 * not blocking), or at once when it has room; resolves too when `signal`
 * aborts. A follow that waits here reads nothing meanwhile, so the server
 * applies its own rules to a slow reader (`--follow-stall`, `follow_lagging`)
 * instead of this process holding every record in memory.
 */
export async function stdoutRoom(signal?: AbortSignal): Promise<void> {
  if (!process.stdout.writableNeedDrain || signal?.aborted) return;
  await once(process.stdout, "drain", { signal }).catch(() => undefined);
}

/** Writes one value as JSON (pretty) followed by a newline. */
export function printJson(value: unknown): void {
  process.stdout.write(`${toJson(value, 2)}\n`);
}

/** Writes one value as a single JSON line (for streams of records). */
export function printJsonLine(value: unknown): void {
  process.stdout.write(`${toJson(value)}\n`);
}

/** C0 and C1 control characters, DEL, and the Unicode bidirectional overrides and isolates (which reorder what a terminal shows). */
const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

/**
 * `text` with every control character escaped (`\n`, `\r`, `\t`, else
 * `\xHH` or `\u{HHHH}`), so a stored id can neither break a table row nor
 * send escape sequences to the operator's terminal. Other text, backslashes
 * included, is unchanged; `--json` output carries the exact value.
 */
export function printable(text: string): string {
  return text.replace(UNPRINTABLE, (c) => {
    if (c === "\n") return "\\n";
    if (c === "\r") return "\\r";
    if (c === "\t") return "\\t";
    const code = c.codePointAt(0)!;
    return code <= 0xff ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u{${code.toString(16)}}`;
  });
}

/** Writes a plain, borderless table with a header row; empty cells print as `-`, control characters escaped ({@link printable}). */
export function printTable(head: string[], rows: Array<Array<string | number | bigint | boolean | undefined>>): void {
  const t = new Table({
    head,
    chars: { top: "", "top-mid": "", "top-left": "", "top-right": "", bottom: "", "bottom-mid": "", "bottom-left": "", "bottom-right": "", left: "", "left-mid": "", mid: "", "mid-mid": "", right: "", "right-mid": "", middle: "  " },
    style: { head: [], border: [], "padding-left": 0, "padding-right": 0 },
  });
  for (const r of rows) t.push(r.map((c) => (c === undefined || c === "" ? "-" : printable(String(c)))));
  process.stdout.write(`${t.toString()}\n`);
}

/** Writes `key  value` pairs as a two-column table, control characters escaped ({@link printable}). */
export function printFields(fields: Array<[string, string | number | bigint | boolean | undefined]>): void {
  const width = Math.max(...fields.map(([k]) => k.length));
  for (const [k, v] of fields) process.stdout.write(`${k.padEnd(width)}  ${v === undefined || v === "" ? "-" : printable(String(v))}\n`);
}

/**
 * Runs a command action: prints a failure as one line on stderr
 * (`mecatl-drivers: <message>`) and sets the exit status, 2 for bad flags or
 * arguments and 1 for anything else.
 */
export function action<A extends unknown[]>(fn: (...args: A) => Promise<void>): (...args: A) => Promise<void> {
  return async (...args: A) => {
    try {
      await fn(...args);
    } catch (err) {
      const usage = err instanceof DriverConfigError || err instanceof InvalidRequestError || err instanceof UsageError;
      const message = err instanceof DriverError || usage || err instanceof Error ? (err as Error).message : String(err);
      process.stderr.write(`mecatl-drivers: ${message}\n`);
      process.exitCode = usage ? EXIT_USAGE : EXIT_FAILURE;
    }
  };
}

/** A command-line mistake found after parsing (a missing flag, a bad value). */
export class UsageError extends Error {
  override name = "UsageError";
}
