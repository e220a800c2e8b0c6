import { createServer } from "node:net";

/** Asks the kernel for a free TCP port on 127.0.0.1. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const addr = s.address();
      const port = typeof addr === "object" && addr !== null ? addr.port : 0;
      s.close(() => resolve(port));
    });
  });
}

/** True when a TCP listener can bind `port` on 127.0.0.1 right now. */
export function portIsFree(port: number): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const s = createServer();
    s.once("error", () => resolve(false));
    s.listen(port, "127.0.0.1", () => s.close(() => resolve(true)));
  });
}

/**
 * A free TCP port on 127.0.0.1 in `min`-`max` (default 20000-32767, below
 * the kernel's ephemeral range, 32768-60999 here), chosen at random and
 * checked by binding it, together with `port + alsoFreeAt` when given (a
 * Redis Cluster node's bus port): a port no `listen(0)` and no outgoing
 * connection will be given, for a process that a test kills and restarts on
 * the same port. Sub-ranges keep such processes apart: Redis Cluster nodes
 * 20000-22767 (buses 30000-32767), single redis-servers 23000-26999, driver
 * servers restarted on their port 27000-29999.
 */
export async function freeLowPort(min = 20000, max = 32767, alsoFreeAt?: number): Promise<number> {
  for (let tries = 0; ; tries++) {
    const port = min + Math.floor(Math.random() * (max - min + 1));
    if ((await portIsFree(port)) && (alsoFreeAt === undefined || (await portIsFree(port + alsoFreeAt)))) return port;
    if (tries > 100) throw new Error(`no free port in ${min}-${max}`);
  }
}

/** Polls `check` every 25 ms until it returns true. @throws Error naming `what` after `timeoutMs`. */
export async function waitFor(check: () => Promise<boolean> | boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * Waits until this host's wall clock is more than a millisecond past `nanos`
 * (nanoseconds since the epoch), so that a time a server on this host stamps
 * next is strictly later: the condition a "later save is later" assertion
 * needs, instead of a sleep of a guessed length.
 */
export function clockPast(nanos: bigint): Promise<void> {
  return waitFor(() => BigInt(Date.now()) * 1_000_000n > nanos + 1_000_000n, 5000, `the clock to pass ${nanos} ns`);
}
