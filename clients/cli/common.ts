import { Command, InvalidArgumentError } from "commander";
import { addDriverOptions, driverClientOptions, TARGET_ENV, URL_FLAG_KEYS, type DriverFlags, type UrlFlag } from "../driver-flags.js";
import { openDriverClients, type DriverClients } from "../factory.js";
import { parseRfc3339 } from "../time.js";
import { printJson, UsageError } from "./output.js";

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
 * Runs `fn` for each id in turn on one connection, then reports
 * `<verb> <id>` per line, or `{"<verb>": [ids]}` with `--json`.
 *
 * @throws what {@link withClients} or `fn` throws (ids before the failing one were done).
 */
export async function forEachId(ids: string[], flags: CommonFlags, url: UrlFlag, verb: string, fn: (clients: DriverClients, id: string) => Promise<void>): Promise<void> {
  await withClients(flags, url, async (c) => {
    for (const id of ids) await fn(c, id);
  });
  if (flags.json) printJson({ [verb]: ids });
  else for (const id of ids) process.stdout.write(`${verb} ${id}\n`);
}

/** Commander parser for a whole number ≥ 0. */
export function parseCount(text: string): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < 0 || n > 2 ** 31 - 1) throw new InvalidArgumentError(`expected a whole number, got ${JSON.stringify(text)}`);
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
