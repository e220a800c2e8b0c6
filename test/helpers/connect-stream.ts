/** Server-streaming calls over the Connect protocol (JSON), made with `fetch`, for tests of the Connect listener. */

/** One Connect-protocol envelope of a streamed answer: flags (2 = end of stream) and its JSON. */
export interface Envelope {
  flags: number;
  json: Record<string, unknown>;
}

/**
 * Calls a server-streaming method over the Connect protocol (JSON) with
 * `fetch`, sending `connect-timeout-ms: timeoutMs` when given, and reads envelopes
 * until the stream ends or `stopAfter` returns true for those so far (then
 * the request is aborted, as a client that cancels). Resolves to the
 * envelopes and whether the server ended the stream (false when this
 * client aborted it).
 *
 * @throws Error when the answer's HTTP status is not 200, or the body fails other than by this abort.
 */
export async function connectStream(address: string, path: string, request: unknown, timeoutMs: number | undefined, stopAfter: (got: Envelope[]) => boolean): Promise<{ envelopes: Envelope[]; ended: boolean }> {
  const message = Buffer.from(JSON.stringify(request));
  const prefix = Buffer.alloc(5);
  prefix.writeUInt32BE(message.length, 1);
  const abort = new AbortController();
  const answer = await fetch(`http://${address}${path}`, {
    method: "POST",
    headers: { "content-type": "application/connect+json", ...(timeoutMs === undefined ? {} : { "connect-timeout-ms": String(timeoutMs) }) },
    body: Buffer.concat([prefix, message]),
    signal: abort.signal,
  });
  if (answer.status !== 200) throw new Error(`${path} answered HTTP ${answer.status}: ${await answer.text()}`);
  const envelopes: Envelope[] = [];
  let pending = Buffer.alloc(0);
  try {
    for await (const chunk of answer.body as unknown as AsyncIterable<Uint8Array>) {
      pending = Buffer.concat([pending, chunk]);
      while (pending.length >= 5 && pending.length >= 5 + pending.readUInt32BE(1)) {
        const length = pending.readUInt32BE(1);
        envelopes.push({ flags: pending[0]!, json: JSON.parse(pending.subarray(5, 5 + length).toString("utf8")) as Record<string, unknown> });
        pending = pending.subarray(5 + length);
      }
      if (stopAfter(envelopes)) {
        abort.abort();
        break;
      }
    }
  } catch (err) {
    if (!abort.signal.aborted) throw err;
  }
  return { envelopes, ended: !abort.signal.aborted };
}

