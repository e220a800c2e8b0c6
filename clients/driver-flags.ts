import { readFileSync } from "node:fs";
import { Option, type Command } from "commander";
import { DriverConfigError } from "./targets.js";
import type { DriverClientOptions } from "./factory.js";
import type { DriverTls } from "./transport.js";

/** Environment variable read when `--driver-auth-token` is not given (wire-contract.md section 6). */
export const AUTH_TOKEN_ENV = "MECATL_DRIVER_AUTH_TOKEN";

/**
 * Environment variable giving the default target of every `--*-url` flag not
 * given on the command line (issue 14), e.g. `MECATL_DRIVERS_TARGET=127.0.0.1:50051`
 * for a server that serves all four services on one port.
 */
export const TARGET_ENV = "MECATL_DRIVERS_TARGET";

/** Commander's parsed values of the flags {@link addDriverOptions} defines. */
export interface DriverFlags {
  sessionStoreUrl?: string;
  eventLogUrl?: string;
  sessionLeaseUrl?: string;
  scheduleStoreUrl?: string;
  driverTls?: boolean;
  driverTlsCa?: string;
  driverTlsCert?: string;
  driverTlsKey?: string;
  driverAuthToken?: string;
}

/** Which of the four `--*-url` flags a command takes. */
export type UrlFlag = "session-store" | "event-log" | "session-lease" | "schedule-store";

/** The {@link DriverFlags} key each `--*-url` flag is parsed into. */
export const URL_FLAG_KEYS = {
  "session-store": "sessionStoreUrl",
  "event-log": "eventLogUrl",
  "session-lease": "sessionLeaseUrl",
  "schedule-store": "scheduleStoreUrl",
} as const satisfies Record<UrlFlag, keyof DriverFlags>;

const URL_HELP: Record<UrlFlag, string> = {
  "session-store": "SessionStoreService target",
  "event-log": "EventLogService target",
  "session-lease": "SessionLeaseService target",
  "schedule-store": "ScheduleStoreService target",
};

/**
 * Adds the harness's driver flags to `command`: the `--*-url` flags listed in
 * `urls` (gRPC targets: HOST:PORT, dns:///HOST:PORT, unix:/PATH,
 * unix:///PATH; each defaults to `MECATL_DRIVERS_TARGET`) and `--driver-tls`, `--driver-tls-ca`, `--driver-tls-cert`,
 * `--driver-tls-key`, `--driver-auth-token` (or `MECATL_DRIVER_AUTH_TOKEN`).
 */
export function addDriverOptions(command: Command, urls: readonly UrlFlag[]): Command {
  for (const u of urls) command.addOption(new Option(`--${u}-url <target>`, `${URL_HELP[u]}: HOST:PORT, dns:///HOST:PORT, unix:/PATH or unix:///PATH`).env(TARGET_ENV));
  return command
    .option("--driver-tls", "use TLS 1.2+ to the drivers (required for any target that is not loopback or a unix socket)")
    .option("--driver-tls-ca <file>", "PEM CA bundle that signs the driver certificates (default: system roots); needs --driver-tls")
    .option("--driver-tls-cert <file>", "PEM client certificate for mTLS; needs --driver-tls and --driver-tls-key")
    .option("--driver-tls-key <file>", "PEM client private key for mTLS; needs --driver-tls and --driver-tls-cert")
    .addOption(new Option("--driver-auth-token <token>", "send 'authorization: Bearer <token>' on every driver RPC").env(AUTH_TOKEN_ENV));
}

function readPem(flag: string, file: string): Buffer {
  try {
    return readFileSync(file);
  } catch (err) {
    throw new DriverConfigError(`cannot read ${flag} ${file}: ${(err as Error).message}`);
  }
}

/**
 * Turns the parsed flags into {@link DriverClientOptions}, reading the PEM
 * files (section 6 rules).
 *
 * @throws DriverConfigError when a CA, certificate or key is given without
 *   `--driver-tls`, a certificate without its key (or the reverse), or a file
 *   cannot be read.
 */
export function driverClientOptions(flags: DriverFlags): DriverClientOptions {
  const tlsFiles: Array<[string, string | undefined]> = [
    ["--driver-tls-ca", flags.driverTlsCa],
    ["--driver-tls-cert", flags.driverTlsCert],
    ["--driver-tls-key", flags.driverTlsKey],
  ];
  if (flags.driverTls !== true) {
    const given = tlsFiles.filter(([, v]) => v !== undefined).map(([f]) => f);
    if (given.length > 0) throw new DriverConfigError(`${given.join(", ")} ${given.length === 1 ? "requires" : "require"} --driver-tls`);
  }
  if ((flags.driverTlsCert === undefined) !== (flags.driverTlsKey === undefined)) {
    throw new DriverConfigError("--driver-tls-cert and --driver-tls-key go together; give both or neither");
  }
  let tls: DriverTls | undefined;
  if (flags.driverTls === true) {
    tls = {
      ca: flags.driverTlsCa === undefined ? undefined : readPem("--driver-tls-ca", flags.driverTlsCa),
      cert: flags.driverTlsCert === undefined ? undefined : readPem("--driver-tls-cert", flags.driverTlsCert),
      key: flags.driverTlsKey === undefined ? undefined : readPem("--driver-tls-key", flags.driverTlsKey),
    };
  }
  return {
    sessionStoreUrl: flags.sessionStoreUrl,
    eventLogUrl: flags.eventLogUrl,
    sessionLeaseUrl: flags.sessionLeaseUrl,
    scheduleStoreUrl: flags.scheduleStoreUrl,
    tls,
    authToken: flags.driverAuthToken === "" ? undefined : flags.driverAuthToken,
  };
}
