import { Command, InvalidArgumentError } from "commander";
import { addDriverOptions, driverClientOptions, TARGET_ENV, URL_FLAG_KEYS, type DriverFlags, type UrlFlag } from "../driver-flags.js";
import { openDriverClients, type DriverClients } from "../factory.js";
import { parseRfc3339 } from "../time.js";
import { readFileSync, writeFileSync } from "node:fs";
import { idProblem } from "../../common/id-rules.js";
import { EXIT_FAILURE, printable, printJson, UsageError } from "./output.js";

/** Flags every operator command has: the driver flags plus `--json`. */
export interface CommonFlags extends DriverFlags {
  json?: boolean;
}

/**
 * A leaf command that talks to the service behind `url`: adds that service's
 * `--*-url` flag, the `--driver-*` flags and `--json`.
 */
export function leafCommand(name: string, description: string, url: UrlFlag): Command {
  return addDriverOptions(new Command(name).description(description), [url]).option("--json", "print JSON for scripts instead of a table");
}

/**
 * Opens only the client `url` names, runs `fn`, and closes the connection.
 *
 * @throws UsageError when that `--*-url` flag is missing; whatever the
 *   factory or `fn` throws.
 */
export async function withClients<T>(flags: DriverFlags, url: UrlFlag, fn: (clients: DriverClients) => Promise<T>): Promise<T> {
  const key = URL_FLAG_KEYS[url];
  const target = flags[key];
  if (typeof target !== "string" || target === "") {
    throw new UsageError(`--${url}-url is required (a gRPC target such as 127.0.0.1:50051 or unix:/run/mecatl/driver.sock), or set ${TARGET_ENV} for every --*-url at once`);
  }
  const options = driverClientOptions(flags);
  const clients = await openDriverClients({ tls: options.tls, authToken: options.authToken, [key]: target });
  try {
    return await fn(clients);
  } finally {
    clients.close();
  }
}

/**
 * Reads the whole file a flag names (`-` for stdin).
 *
 * @throws UsageError (exit status 2) naming the flag and the path when it
 *   cannot be read (missing, a directory, no permission).
 */
export function readFileFlag(flag: string, file: string): Buffer {
  try {
    return readFileSync(file === "-" ? 0 : file);
  } catch (err) {
    const reason = (err as NodeJS.ErrnoException).code === "ENOENT" ? "no such file" : (err as Error).message;
    throw new UsageError(`cannot read ${flag} ${file === "-" ? "- (stdin)" : file}: ${reason}`);
  }
}

/**
 * Writes `bytes` to the file a flag names, creating or replacing it.
 *
 * @throws UsageError (exit status 2) naming the flag and the path when it
 *   cannot be written.
 */
export function writeFileFlag(flag: string, file: string, bytes: Uint8Array): void {
  try {
    writeFileSync(file, bytes);
  } catch (err) {
    throw new UsageError(`cannot write ${flag} ${file}: ${(err as Error).message}`);
  }
}

/** What a multi-id command calls its ids and what it does to them, for its messages. */
export interface IdLabels {
  /** The id's name in messages, singular: `session id`, `schedule name`. */
  noun: string;
  /** Past participle printed per id done: `deleted`, `disabled`. */
  verb: string;
}

/**
 * Checks every id a command was given before any is sent (the services'
 * own rule, common/id-rules.ts), so one malformed id never leaves the others
 * half applied.
 *
 * @throws UsageError (exit 2) naming the first malformed id by position, and
 *   saying that nothing was done.
 */
export function checkIds(ids: string[], labels: IdLabels): void {
  for (const [i, id] of ids.entries()) {
    const problem = idProblem(id);
    if (problem !== undefined) throw new UsageError(`${labels.noun} ${i + 1} of ${ids.length} (${JSON.stringify(id.length > 40 ? `${id.slice(0, 40)}...` : id)}) ${problem}; nothing was ${labels.verb}`);
  }
}

/**
 * Checks every id ({@link checkIds}), then runs `fn` for each in turn on one
 * connection. An id the driver refuses or fails (not found, unavailable...)
 * is reported and the next one is still tried, so the report says exactly
 * what was done: `<verb> <id>` per id done on stdout (JSON: one object
 * `{"<verb>": [ids], "failed": [{"id", "error"}]}`), then, when any failed,
 * `mecatl-drivers: <id>: <error>` per failure and one summary line on
 * stderr, and exit status 1.
 *
 * @throws UsageError for a malformed id (nothing sent); what
 *   {@link withClients} throws before the first call (missing target, bad
 *   TLS files).
 */
export async function forEachId(ids: string[], flags: CommonFlags, url: UrlFlag, labels: IdLabels, fn: (clients: DriverClients, id: string) => Promise<void>): Promise<void> {
  checkIds(ids, labels);
  const done: string[] = [];
  const failed: Array<{ id: string; error: string }> = [];
  await withClients(flags, url, async (c) => {
    for (const id of ids) {
      try {
        await fn(c, id);
        done.push(id);
        if (!flags.json) process.stdout.write(`${labels.verb} ${printable(id)}\n`);
      } catch (err) {
        failed.push({ id, error: err instanceof Error ? err.message : String(err) });
      }
    }
  });
  if (flags.json) printJson({ [labels.verb]: done, failed });
  if (failed.length === 0) return;
  for (const f of failed) process.stderr.write(`mecatl-drivers: ${printable(f.id)}: ${f.error}\n`);
  process.stderr.write(`mecatl-drivers: ${done.length} of ${ids.length} ${labels.verb}; not ${labels.verb}: ${failed.map((f) => printable(f.id)).join(", ")}\n`);
  process.exitCode = EXIT_FAILURE;
}

/** Commander parser for a whole number from 0 to 2^31 − 1. @throws InvalidArgumentError (a usage error, exit 2) for anything else. */
export function parseCount(text: string): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < 0 || n > 2 ** 31 - 1) throw new InvalidArgumentError(`expected a whole number from 0 to 2147483647, got ${JSON.stringify(text)}`);
  return n;
}

/** Commander parser for a lease token (unsigned 64-bit decimal). */
export function parseToken(text: string): bigint {
  if (!/^\d{1,20}$/.test(text) || BigInt(text) > 0xffff_ffff_ffff_ffffn) throw new InvalidArgumentError(`expected a lease token (unsigned decimal), got ${JSON.stringify(text)}`);
  return BigInt(text);
}

/** Commander parser for an RFC 3339 time; the result is nanoseconds since the epoch. */
export function parseTime(text: string): bigint {
  try {
    const ns = parseRfc3339(text);
    if (ns === undefined) throw new RangeError("zero time");
    return ns;
  } catch {
    throw new InvalidArgumentError(`expected an RFC 3339 time such as 2025-01-02T03:04:05Z, got ${JSON.stringify(text)}`);
  }
}
