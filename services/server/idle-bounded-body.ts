import { Code, ConnectError } from "@connectrpc/connect";

/**
 * The refusal of a request whose bytes stopped coming for `idleMs`
 * milliseconds (`--request-idle-timeout`), on either listener: UNAVAILABLE,
 * since it never arrived whole and nothing was stored, so a retry is safe.
 * `part` names what stalled (`message`, `body`) and `received` what had
 * arrived (`N of M bytes`, `N bytes`).
 */
export function requestIdleRefusal(idleMs: number, part: string, received: string): ConnectError {
  return new ConnectError(`request: no bytes of the request ${part} arrived for ${idleMs} ms (${received} received; --request-idle-timeout); nothing was stored`, Code.Unavailable);
}

/**
 * `body` (a request body as it arrives, chunk by chunk) with a bound on
 * the time the next chunk may take once asked for: when neither a chunk
 * nor the end comes within `idleMs` milliseconds, the iteration throws, so
 * the call ends and gives back its share of the in-flight budget. The
 * Connect listener's counterpart of the gRPC listener's idle rule
 * (grpc-request-watch.ts, `--request-idle-timeout`); time the reader spends
 * elsewhere between two asks (waiting for room in the budget) does not
 * count.
 *
 * @param onIdle called once the bound is passed, before the iteration
 *   throws (the Connect listener closes an HTTP/1.1 connection after the
 *   refusal: the rest of its body will not come in time to be read past).
 * @throws ConnectError UNAVAILABLE naming `--request-idle-timeout` and the
 *   bytes received (nothing was stored: the request never arrived whole);
 *   whatever `body` throws.
 */
export async function* idleBoundedBody(body: AsyncIterable<Uint8Array>, idleMs: number, onIdle?: () => void): AsyncIterable<Uint8Array> {
  const chunks = body[Symbol.asyncIterator]();
  let received = 0;
  for (;;) {
    let timer: NodeJS.Timeout | undefined;
    const idle = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        onIdle?.();
        reject(requestIdleRefusal(idleMs, "body", `${received} bytes`));
      }, idleMs);
    });
    let next: IteratorResult<Uint8Array>;
    try {
      // The body's pending read, if the timer wins, settles once the stream is reset; the race has handled it.
      next = await Promise.race([chunks.next(), idle]);
    } finally {
      clearTimeout(timer);
    }
    if (next.done === true) return;
    received += next.value.length;
    yield next.value;
  }
}
