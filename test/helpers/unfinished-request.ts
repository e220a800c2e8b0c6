import type { ClientHttp2Session, ClientHttp2Stream } from "node:http2";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { MAX_MESSAGE_BYTES } from "../../services/server/server.js";
import { grpcPrefix } from "./h2-grpc-call.js";

/**
 * Sends a gRPC Save on `h2` whose prefix announces `declared` bytes (default:
 * one byte more than the message limit), with 64 KiB of its body and
 * `headers` (an `authorization`, a `grpc-timeout`), and keeps the stream
 * open: a request the server answers before it has read it whole. Resolves to the answer's
 * grpc-status and grpc-message and the stream's RST_STREAM code once the
 * server closes it, or `rstCode: "open after 5 s"`.
 */
export async function unfinishedSave(h2: ClientHttp2Session, declared = MAX_MESSAGE_BYTES + 1, headers: Record<string, string> = {}): Promise<{ status: string; message: string; rstCode: number | string }> {
  const stream = startSave(h2, declared, 64 * 1024, headers);
  const answer = new Promise<{ status: string; message: string }>((resolve) => {
    const take = (h: Record<string, unknown>) => h["grpc-status"] !== undefined && resolve({ status: String(h["grpc-status"]), message: decodeURIComponent(String(h["grpc-message"])) });
    stream.on("response", take);
    stream.on("trailers", take);
  });
  const closed = new Promise<number>((resolve) => stream.on("close", () => resolve(stream.rstCode ?? -1)));
  // Read the (empty) answer body: a stream reset with NO_ERROR closes once its readable side is consumed.
  stream.resume();
  const rstCode = await Promise.race([closed, new Promise<string>((resolve) => setTimeout(() => resolve("open after 5 s"), 5000))]);
  return { ...(await answer), rstCode };
}

/**
 * Starts a gRPC Save on `h2` whose length prefix announces `declared` bytes
 * and sends only the prefix and the first `sent` bytes of the message, with
 * `headers`; the stream stays open (its errors are ignored).
 */
export function startSave(h2: ClientHttp2Session, declared: number, sent: number, headers: Record<string, string> = {}): ClientHttp2Stream {
  return startCall(h2, `/${SessionStoreService.typeName}/Save`, Buffer.concat([grpcPrefix(declared), Buffer.alloc(sent)]), headers);
}

/**
 * Starts a gRPC call to `path` on `h2` with `headers`, writes `body` (raw:
 * prefixes and messages as the test makes them) and keeps the stream open
 * (its errors are ignored).
 */
export function startCall(h2: ClientHttp2Session, path: string, body: Buffer, headers: Record<string, string> = {}): ClientHttp2Stream {
  const stream = h2.request({ ":method": "POST", ":path": path, "content-type": "application/grpc", te: "trailers", ...headers });
  stream.on("error", () => undefined);
  stream.write(body);
  return stream;
}

/** The grpc-status and the URI-decoded grpc-message of `stream`'s answer, as "status message", once its response headers come. */
export function answerOf(stream: ClientHttp2Stream): Promise<string> {
  return new Promise((resolve) => stream.on("response", (h) => resolve(`${h["grpc-status"]} ${decodeURIComponent(String(h["grpc-message"]))}`)));
}
