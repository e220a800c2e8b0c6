/**
 * Writes the one line a `serve` that cannot start prints before it exits
 * with status 2 (README.md "Serving", issue 10 deliverable 4). On a terminal
 * it is plain text, `mecatl-drivers: <what is wrong and the fix>`, for the
 * operator typing the command. Otherwise (a supervisor, a container runtime,
 * a log collector reading the pipe) it is one JSON object in the shape of
 * the running server's log lines (services/server/logger.ts: pino's numeric
 * `level` 60 for fatal, `time` in milliseconds since the epoch, `service`,
 * `pid`, `msg`), so that every line the server writes to stderr is JSON.
 *
 * @param message the refusal, naming the flag and the fix (no trailing newline).
 * @param stream where to write; the process's stderr by default.
 */
export function writeStartupRefusal(message: string, stream: NodeJS.WriteStream = process.stderr): void {
  const text = message.trimEnd();
  if (stream.isTTY === true) {
    stream.write(`mecatl-drivers: ${text}\n`);
    return;
  }
  stream.write(`${JSON.stringify({ level: 60, time: Date.now(), service: "mecatl-drivers", pid: process.pid, exitCode: 2, msg: text })}\n`);
}
