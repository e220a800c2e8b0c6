import { createServer, connect, type Server, type Socket } from "node:net";

/**
 * How the proxy treats traffic right now:
 * - `pass`: forward both ways;
 * - `delay`: forward both ways, each chunk held for {@link FaultProxy.delayMs};
 * - `blackhole`: accept and read every byte in both directions, forward none
 *   and never close (a peer behind a NAT that timed out, or a host that lost
 *   power); new connections are accepted and black-holed too;
 * - `refuse`: new connections are closed at once (a service that is down but
 *   whose host answers).
 */
export type FaultMode = "pass" | "delay" | "blackhole" | "refuse";

/** One client connection through the proxy and its upstream twin. */
interface Pair {
  client: Socket;
  upstream: Socket;
}

/**
 * A TCP proxy on 127.0.0.1 for fault tests: put it between the server and
 * Redis (or between a gRPC client and the server) and inject faults between
 * steps. Every fault is applied to real sockets, so the software under test
 * sees exactly what a real network fault would give it.
 */
export interface FaultProxy {
  /** The port the proxy listens on. */
  readonly port: number;
  /** `127.0.0.1:<port>`. */
  readonly address: string;
  /** Connections accepted so far (for assertions that a reconnect happened). */
  readonly accepted: number;
  /** Open client connections. */
  readonly open: number;
  /** Bytes forwarded from clients to the upstream so far. */
  readonly bytesUp: number;
  /** Bytes forwarded from the upstream to clients so far (e.g. to check how much a client read). */
  readonly bytesDown: number;
  /** Milliseconds each chunk is held in `delay` mode. */
  delayMs: number;
  /** Switches the mode for every open and future connection. */
  setMode(mode: FaultMode): void;
  /**
   * Arms a lost-reply fault: the next client-to-upstream chunk for which
   * `match` returns true (any chunk by default) is forwarded; every byte the
   * upstream sends back on that connection from then on is swallowed, and
   * once the upstream has answered (or after `cutAfterMs`, default 200 ms)
   * both sockets are closed. The upstream has received, and so normally
   * executed, the request; the client never learns its outcome. Resolves
   * when the connections have been cut, with the chunk that triggered it.
   * With `thenMode`, the proxy switches to that mode just before the cut, so
   * the client's reconnection already meets it (e.g. `refuse`: Redis stays
   * unreachable after the lost reply).
   */
  loseNextReply(options?: { match?: (chunk: Buffer) => boolean; cutAfterMs?: number; thenMode?: FaultMode }): Promise<Buffer>;
  /**
   * Resolves with the next client-to-upstream chunk that `blackhole` mode
   * swallows and `match` accepts (any chunk by default): the signal that a
   * request has left the client and will never reach the upstream.
   */
  nextSwallowed(match?: (chunk: Buffer) => boolean): Promise<Buffer>;
  /** Resets (TCP RST) every open connection, both sides. */
  resetAll(): void;
  /** Stops listening and destroys every connection. */
  close(): Promise<void>;
}

/**
 * Starts a {@link FaultProxy} in `pass` mode forwarding to `upstreamPort` on
 * 127.0.0.1.
 */
export async function startFaultProxy(upstreamPort: number, upstreamHost = "127.0.0.1"): Promise<FaultProxy> {
  const pairs = new Set<Pair>();
  /** Every socket still open, those of pairs a black hole dropped included (closed by {@link FaultProxy.close}). */
  const sockets = new Set<Socket>();
  let mode: FaultMode = "pass";
  let accepted = 0;
  const bytes = { up: 0, down: 0 };
  let armed: { match: (chunk: Buffer) => boolean; cutAfterMs: number; thenMode?: FaultMode; done: (chunk: Buffer) => void } | undefined;
  /** Connections whose reply is being swallowed by {@link FaultProxy.loseNextReply}. */
  const lost = new WeakSet<Pair>();
  /** Waiters of {@link FaultProxy.nextSwallowed}. */
  let swallowWatchers: Array<{ match: (chunk: Buffer) => boolean; done: (chunk: Buffer) => void }> = [];
  const swallowed = (chunk: Buffer) => {
    const hit = swallowWatchers.filter((w) => w.match(chunk));
    swallowWatchers = swallowWatchers.filter((w) => !hit.includes(w));
    for (const w of hit) w.done(chunk);
  };

  const forward = (from: Socket, to: Socket, pair: Pair, towardUpstream: boolean) => {
    from.on("data", (chunk: Buffer) => {
      if (mode === "blackhole" && towardUpstream) swallowed(chunk);
      if (mode === "blackhole" || lost.has(pair)) return;
      if (towardUpstream && armed !== undefined && armed.match(chunk)) {
        const trigger = armed;
        armed = undefined;
        lost.add(pair);
        to.write(chunk);
        let cut = false;
        const cutNow = () => {
          if (cut) return;
          cut = true;
          if (trigger.thenMode !== undefined) mode = trigger.thenMode;
          pair.client.destroy();
          pair.upstream.destroy();
          trigger.done(chunk);
        };
        pair.upstream.once("data", () => setTimeout(cutNow, 5));
        setTimeout(cutNow, trigger.cutAfterMs);
        return;
      }
      if (towardUpstream) bytes.up += chunk.length;
      else bytes.down += chunk.length;
      if (mode === "delay") setTimeout(() => to.writable && to.write(chunk), proxy.delayMs);
      else to.write(chunk);
    });
  };

  const server: Server = createServer((client) => {
    accepted++;
    if (mode === "refuse") {
      client.destroy();
      return;
    }
    const upstream = connect(upstreamPort, upstreamHost);
    const pair: Pair = { client, upstream };
    pairs.add(pair);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.once("close", () => sockets.delete(s));
    }
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    forward(client, upstream, pair, true);
    forward(upstream, client, pair, false);
    const drop = () => {
      pairs.delete(pair);
      // A black hole never tells the other side that its peer went away.
      if (mode === "blackhole") return;
      client.destroy();
      upstream.destroy();
    };
    client.on("close", drop);
    upstream.on("close", drop);
    client.on("error", () => undefined);
    upstream.on("error", () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const addr = server.address();
  const port = typeof addr === "object" && addr !== null ? addr.port : 0;

  const proxy: FaultProxy = {
    port,
    address: `127.0.0.1:${port}`,
    get accepted() {
      return accepted;
    },
    get open() {
      return pairs.size;
    },
    get bytesUp() {
      return bytes.up;
    },
    get bytesDown() {
      return bytes.down;
    },
    delayMs: 0,
    setMode(next) {
      mode = next;
    },
    loseNextReply(options = {}) {
      return new Promise((done) => {
        armed = { match: options.match ?? (() => true), cutAfterMs: options.cutAfterMs ?? 200, thenMode: options.thenMode, done };
      });
    },
    nextSwallowed(match = () => true) {
      return new Promise((done) => swallowWatchers.push({ match, done }));
    },
    resetAll() {
      for (const p of pairs) {
        p.client.resetAndDestroy();
        p.upstream.resetAndDestroy();
      }
      pairs.clear();
    },
    async close() {
      for (const s of sockets) s.destroy();
      pairs.clear();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return proxy;
}
