import { constants, type Http2Stream } from "node:http2";
import type { Socket } from "node:net";

/**
 * A watched stream's or socket's last progress: its unsent bytes and its
 * connection's bytes written then, and when (ms, `performance.now()`).
 */
interface Seen {
  pending: number;
  written: number;
  since: number;
}

/**
 * Bytes its connection must have written since a stream's last progress for
 * that to count as progress too: more than keepalive PING frames (17 bytes),
 * which a server writes to a client that reads nothing.
 */
const CONNECTION_PROGRESS_BYTES = 1024;

/**
 * Ends answers whose client takes none of their bytes for `idleMs`
 * milliseconds (`--answer-idle-timeout`), on both listeners: an HTTP/2
 * stream with answer bytes waiting to be sent is reset with CANCEL when
 * neither their count nor its connection's bytes written (by more than
 * {@link CONNECTION_PROGRESS_BYTES}) have changed since `idleMs` ago, and an
 * HTTP/1.1 connection with unsent bytes is closed when it has written none
 * since then. Node counts a write as unsent until all of it is sent, so a
 * single large answer read slowly shows progress only on its connection.
 * The call ends as if its client had gone (CANCELLED; its bytes go back to
 * `--max-inflight-bytes`).
 *
 * Before, a client that stopped reading a large answer while its
 * connection stayed alive (its HTTP/2 stack answers the keepalive pings)
 * held the answer's share of the in-flight budget until it read or went
 * away: three of them could refuse every large call (a fresh-eyes run).
 * A slow reader is never cut off: any change in what is waiting counts.
 * Only answers are watched; requests have `--request-idle-timeout`.
 *
 * One timer looks at every watched stream and socket each quarter of
 * `idleMs`, so a stall is ended between `idleMs` and 1.25 × `idleMs` after
 * the last byte the client took.
 */
export class AnswerStallWatch {
  private readonly streams = new Map<Http2Stream, Seen>();
  private readonly sockets = new Map<Socket, Seen>();
  private readonly timer: NodeJS.Timeout;

  /**
   * @param idleMs milliseconds an answer may wait with none of its bytes taken (> 0).
   * @param onStall told of each answer ended, with what was still waiting (bytes as Node counts them).
   */
  constructor(
    private readonly idleMs: number,
    private readonly onStall: (pendingBytes: number, http: "HTTP/2" | "HTTP/1.1") => void,
  ) {
    this.timer = setInterval(() => this.look(), Math.max(25, Math.floor(idleMs / 4))).unref();
  }

  /** Watches an HTTP/2 stream of either listener until it closes. */
  watchStream(stream: Http2Stream): void {
    this.streams.set(stream, { pending: 0, written: 0, since: 0 });
    stream.once("close", () => this.streams.delete(stream));
  }

  /** Watches an HTTP/1.1 connection of the Connect listener until it closes (once per socket, whatever its requests). */
  watchSocket(socket: Socket): void {
    if (this.sockets.has(socket)) return;
    this.sockets.set(socket, { pending: 0, written: 0, since: 0 });
    socket.once("close", () => this.sockets.delete(socket));
  }

  /** Stops watching (the server is closing). */
  close(): void {
    clearInterval(this.timer);
    this.streams.clear();
    this.sockets.clear();
  }

  private look(): void {
    const now = performance.now();
    for (const [stream, seen] of this.streams) {
      if (this.stalled(seen, stream.bufferSize, stream.session?.socket.bytesWritten ?? 0, CONNECTION_PROGRESS_BYTES, now)) {
        this.onStall(seen.pending, "HTTP/2");
        stream.close(constants.NGHTTP2_CANCEL);
      }
    }
    for (const [socket, seen] of this.sockets) {
      if (this.stalled(seen, socket.writableLength, socket.bytesWritten, 1, now)) {
        this.onStall(seen.pending, "HTTP/1.1");
        socket.destroy();
      }
    }
  }

  /**
   * Notes `pending` unsent bytes and `written` bytes of the connection; true
   * when bytes are unsent and there was no progress (another count of unsent
   * bytes, or at least `progressBytes` written) for `idleMs` or longer.
   */
  private stalled(seen: Seen, pending: number, written: number, progressBytes: number, now: number): boolean {
    if (pending === 0 || pending !== seen.pending || written - seen.written >= progressBytes) {
      seen.pending = pending;
      seen.written = written;
      seen.since = now;
      return false;
    }
    return now - seen.since >= this.idleMs;
  }
}
