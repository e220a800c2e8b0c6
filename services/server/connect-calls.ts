import type { ConnectError } from "@connectrpc/connect";

/**
 * The calls in flight on the Connect listener, for a graceful shutdown
 * (docs/DESIGN.md "Transport", as on the gRPC listener): server streams
 * (follow, health Watch) are ended with UNAVAILABLE so that their clients
 * resume elsewhere, and unary calls are left to finish within
 * `--shutdown-grace` before the store is closed. Before, the listener was
 * only closed after the gRPC calls had drained: a follow stream on it lost
 * its socket with no status, and a Save still running met a closed store.
 *
 * Each stream gets an abort controller of its own, kept in a set (as
 * grpc-adapter.ts `OpenStreams` does), so that thousands of followers add
 * no listeners to one shared signal.
 */
export class ConnectCalls {
  private running = 0;
  private readonly streams = new Set<AbortController>();
  private reason: ConnectError | undefined;
  private drainedNow: (() => void) | undefined;

  /**
   * Notes a call that starts; `stream` for a server stream. Returns the
   * signal that ends the stream at shutdown (undefined for a unary call),
   * and `end`, to call once its answer is written or it failed.
   */
  begin(stream: boolean): { shutdown: AbortSignal | undefined; end: () => void } {
    this.running++;
    const controller = stream ? new AbortController() : undefined;
    if (controller !== undefined) {
      if (this.reason !== undefined) controller.abort(this.reason);
      else this.streams.add(controller);
    }
    let ended = false;
    return {
      shutdown: controller?.signal,
      end: () => {
        if (ended) return;
        ended = true;
        if (controller !== undefined) this.streams.delete(controller);
        if (--this.running === 0) this.drainedNow?.();
      },
    };
  }

  /** Ends every open stream (and any that starts from now on) with `reason`. */
  shutdown(reason: ConnectError): void {
    this.reason = reason;
    for (const controller of this.streams) controller.abort(reason);
    this.streams.clear();
  }

  /** Resolves once no call is in flight. */
  drained(): Promise<void> {
    if (this.running === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const before = this.drainedNow;
      this.drainedNow = () => {
        this.drainedNow = undefined;
        before?.();
        resolve();
      };
    });
  }
}
