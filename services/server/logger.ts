import { pino, type Logger } from "pino";
import { format } from "node:util";
import * as grpc from "@grpc/grpc-js";

/**
 * Creates the process logger: one JSON object per line on stderr (docs/DESIGN.md
 * "Transport"). Payloads and tokens are never passed to it.
 *
 * @param level pino level name (`info` by default, `--log-level`).
 */
export function createLogger(level: string): Logger {
  return pino({ level, base: { service: "mecatl-drivers", pid: process.pid } }, pino.destination({ fd: 2, sync: true }));
}

/**
 * Routes everything else the process would print on stderr through `logger`,
 * so that every line a running server writes there is JSON (issue 10
 * deliverable 4): Node's process warnings (deprecations,
 * MaxListenersExceededWarning...) as `warn`, grpc-js's own log lines as
 * `warn`, and an uncaught exception as `fatal` before exiting with status 1
 * (Node's own status for it).
 */
export function routeProcessOutput(logger: Logger): void {
  process.removeAllListeners("warning");
  process.on("warning", (warning: Error & { code?: string }) => {
    logger.warn({ warning: warning.name, code: warning.code }, warning.message);
  });
  grpc.setLogger({ error: (...args: unknown[]) => logger.warn({ source: "grpc-js" }, format(...args)) });
  process.on("uncaughtException", (err) => {
    logger.fatal({ err: err.stack ?? String(err) }, "uncaught exception; exiting");
    process.exit(1);
  });
}

export type { Logger };
