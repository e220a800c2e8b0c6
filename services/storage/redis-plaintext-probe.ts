import { connect } from "node:net";

/** Milliseconds {@link speaksPlaintextRedis} waits for an answer before giving up (and saying no). */
export const PLAINTEXT_PROBE_MS = 1000;

/**
 * Asks whether `host:port` is a Redis server speaking cleartext RESP: opens a
 * TCP connection, sends `PING`, and looks at the first byte of the answer
 * (`+PONG`, or `-NOAUTH ...` from a server that wants a password). A TLS
 * server answers with a TLS alert or closes, so the probe says no.
 *
 * Used before a `rediss://` connection: a TLS handshake sent to a cleartext
 * Redis is read as an unfinished inline command and never answered, so
 * without the probe the mistake surfaces only as a connect timeout (issue 10,
 * deliverable 4).
 *
 * @returns true only on a RESP answer; false on a TLS answer, a refused or
 *   failed connection, or silence for {@link PLAINTEXT_PROBE_MS} milliseconds.
 *   Never throws.
 */
export function speaksPlaintextRedis(host: string, port: number, timeoutMs = PLAINTEXT_PROBE_MS): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (answer: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(answer);
    };
    const timer = setTimeout(() => done(false), timeoutMs);
    socket.once("connect", () => socket.write("PING\r\n"));
    socket.once("data", (chunk: Buffer) => done(chunk[0] === 0x2b || chunk[0] === 0x2d));
    socket.once("error", () => done(false));
    socket.once("close", () => done(false));
  });
}
