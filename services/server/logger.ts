import { pino, type Logger } from "pino";

/**
 * Creates the process logger: one JSON object per line on stderr (DESIGN.md
 * "Transport"). Payloads and tokens are never passed to it.
 *
 * @param level pino level name (`info` by default, `--log-level`).
 */
export function createLogger(level: string): Logger {
  return pino({ level, base: { service: "mecatl-drivers", pid: process.pid } }, pino.destination({ fd: 2, sync: true }));
}

export type { Logger };
