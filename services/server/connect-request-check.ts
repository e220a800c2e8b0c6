import { brotliDecompressSync, gunzipSync } from "node:zlib";
import type { DescMessage } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { decodeRequest } from "../rpc/decode-request.js";
import { requireUtf8Json } from "../rpc/require-utf8-json.js";
import { requireDecodableJson } from "../rpc/require-decodable-json.js";

/**
 * Most bytes of a JSON message on the Connect listener (1 MiB): a request's
 * JSON text, an answer's protobuf encoding (its JSON is about a third
 * longer). protobuf-es writes and reads `bytes` fields as base64 in
 * JavaScript, on the event loop: about 0.2 s per MiB written and 0.05 s per
 * MiB read on a busy 2-core machine, 12 s for a 64 MiB snapshot, while
 * every other call and health waits. JSON is for looking at a store with
 * curl; binary callers (Connect `application/proto`, gRPC, gRPC-Web, the
 * gRPC listener) carry up to the 64 MiB message limit (README "Serving").
 */
export const JSON_MESSAGE_BYTES = 1024 * 1024;

/** How a request body is framed, the header naming its compression, and the check each of its messages gets. */
type Framing = [RegExp, "whole" | "enveloped", string, (input: DescMessage, message: Uint8Array) => void];

/** Binary content types of the Connect listener and how each frames its request (parameters left out). */
const FRAMING: readonly Framing[] = [
  [/^application\/proto$/i, "whole", "content-encoding", decodeRequest],
  [/^application\/connect\+proto$/i, "enveloped", "connect-content-encoding", decodeRequest],
  [/^application\/grpc(-web)?(\+proto)?$/i, "enveloped", "grpc-encoding", decodeRequest],
];

/**
 * A JSON request message's check: its text must be UTF-8 (connect-es would
 * read other bytes as U+FFFD and go on), and a text protobuf-es cannot read
 * is refused naming the field first (require-decodable-json.ts).
 */
function checkJson(input: DescMessage, text: Uint8Array): void {
  requireUtf8Json(input, text);
  requireDecodableJson(input, text);
}

/** JSON content types of the Connect listener, each checked by {@link checkJson}. */
const JSON_FRAMING: readonly Framing[] = [
  [/^application\/json$/i, "whole", "content-encoding", checkJson],
  [/^application\/connect\+json$/i, "enveloped", "connect-content-encoding", checkJson],
  [/^application\/grpc(-web)?\+json$/i, "enveloped", "grpc-encoding", checkJson],
];

/** The media type of a request's `content-type` header, without parameters (`application/json; charset=utf-8` → `application/json`); empty when absent. */
export function mediaType(headers: Headers): string {
  return headers.get("content-type")?.split(";")[0]?.trim() ?? "";
}

/** True when `type` (a {@link mediaType}) is a binary codec of the Connect listener (Connect, gRPC or gRPC-Web with protobuf). */
export function binaryMediaType(type: string): boolean {
  return FRAMING.some(([pattern]) => pattern.test(type));
}

/** True when `type` (a {@link mediaType}) is a JSON codec of the Connect listener (Connect, gRPC or gRPC-Web with `+json`). */
function jsonMediaType(type: string): boolean {
  return JSON_FRAMING.some(([pattern]) => pattern.test(type));
}

/**
 * The request body `body` of a call to a method whose input is `input`,
 * checked before connect-es parses it, so that a Connect-listener caller
 * gets what a gRPC-listener caller gets (issue 10 deliverable 5;
 * wire-contract.md section 1):
 *
 * - binary bytes that are not a valid message: INVALID_ARGUMENT naming the
 *   field at fault (services/rpc/decode-request.ts), where connect-es would
 *   answer INTERNAL "parse binary: ..."; compressed messages (gzip, br) are
 *   decompressed to check them, at most `maxMessageBytes`;
 * - a JSON request body over {@link JSON_MESSAGE_BYTES}: RESOURCE_EXHAUSTED
 *   naming the limit (JSON is parsed on the event loop);
 * - JSON text that is not UTF-8: INVALID_ARGUMENT naming the field
 *   (require-utf8-json.ts), where connect-es would read U+FFFD and go on;
 * - JSON text protobuf-es cannot read as the method's input (no JSON, a
 *   value of the wrong type, a bad timestamp): INVALID_ARGUMENT naming the
 *   field first (require-decodable-json.ts), where connect-es names it last.
 *
 * Every RPC served takes one request message, so the whole body is read
 * before anything is handed on (connect-es reads it whole too); it is then
 * handed on unchanged. Framing this check cannot follow (a truncated
 * envelope, an unknown encoding) is left to connect-es, which refuses it.
 *
 * @param headers the request's headers (content type, encodings).
 * @throws ConnectError INVALID_ARGUMENT or RESOURCE_EXHAUSTED from the iteration, as above.
 */
export async function* checkedRequest(body: AsyncIterable<Uint8Array>, headers: Headers, input: DescMessage, maxMessageBytes: number): AsyncIterable<Uint8Array> {
  const contentType = mediaType(headers);
  const chunks: Uint8Array[] = [];
  let length = 0;
  for await (const chunk of body) {
    chunks.push(chunk);
    length += chunk.byteLength;
    if (length > JSON_MESSAGE_BYTES && jsonMediaType(contentType)) {
      throw new ConnectError(`request: a JSON request may be at most ${JSON_MESSAGE_BYTES} bytes on this listener, and this one has ${length} or more; send larger ones in binary (application/proto) or over gRPC`, Code.ResourceExhausted);
    }
  }
  const whole = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, length);
  const framing = FRAMING.find(([type]) => type.test(contentType)) ?? JSON_FRAMING.find(([type]) => type.test(contentType));
  if (framing !== undefined) {
    const [, shape, encodingHeader, check] = framing;
    const encoding = headers.get(encodingHeader) ?? "identity";
    for (const message of messagesOf(whole, shape, encoding, maxMessageBytes)) check(input, message);
  }
  yield whole;
}

/** The messages of a binary body, decompressed; stops (leaving the rest to connect-es) at framing it cannot follow. */
function* messagesOf(body: Uint8Array, shape: "whole" | "enveloped", encoding: string, maxMessageBytes: number): Iterable<Uint8Array> {
  if (shape === "whole") {
    const message = decompressed(body, encoding, maxMessageBytes);
    if (message !== undefined) yield message;
    return;
  }
  const view = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  for (let at = 0; at + 5 <= view.length; ) {
    const flags = view[at]!;
    const end = at + 5 + view.readUInt32BE(at + 1);
    if (end > view.length) return;
    const data = view.subarray(at + 5, end);
    at = end;
    if ((flags & 0x80) !== 0) continue; // an end-of-stream frame, no message
    const message = (flags & 0x01) !== 0 ? decompressed(data, encoding, maxMessageBytes) : data;
    if (message === undefined) return;
    yield message;
  }
}

/** `data` decoded from `encoding`, or undefined for an encoding or a stream this check leaves to connect-es. */
function decompressed(data: Uint8Array, encoding: string, maxMessageBytes: number): Uint8Array | undefined {
  try {
    if (encoding === "identity") return data;
    if (encoding === "gzip") return gunzipSync(data, { maxOutputLength: maxMessageBytes });
    if (encoding === "br") return brotliDecompressSync(data, { maxOutputLength: maxMessageBytes });
  } catch {
    // Corrupt or too large: connect-es refuses it in its own words.
  }
  return undefined;
}
