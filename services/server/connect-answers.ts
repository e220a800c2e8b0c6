import { create, fromBinary, toBinary, type DescMethod, type DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, type HandlerContext } from "@connectrpc/connect";
import { binaryMediaType, JSON_MESSAGE_BYTES, mediaType } from "./connect-request-check.js";
import { preEncoded } from "../rpc/encoded-answer.js";
import type { AnyServiceImpl } from "./grpc-adapter.js";
import { readOnlyMethod } from "./read-only-methods.js";

/**
 * `impl` as the Connect listener serves it:
 *
 * - an answer built as wire bytes (services/rpc/encoded-answer.ts) goes to a
 *   binary caller as those bytes (protobuf-es writes them back as the
 *   message's unknown fields), and is decoded into its message for any other
 *   caller (JSON: protobuf-es does not write unknown fields into JSON);
 * - a JSON caller's answer of a read (each message of a stream too) whose
 *   protobuf encoding is over {@link JSON_MESSAGE_BYTES} is refused with
 *   RESOURCE_EXHAUSTED naming the size and the limit, before any JSON is
 *   written: protobuf-es writes `bytes` fields as base64 on the event loop,
 *   about 0.2 s per MiB, while every other call and health waits. A write's
 *   answer is not: the write ran, and refusing it would tell the caller it
 *   failed (a fresh-eyes run: ClaimScheduleNow of a 1.5 MB schedule from
 *   curl was applied, then answered 429, three times);
 * - a server stream (follow, health Watch) that stops because the call's
 *   deadline passed or the server is shutting down ends with that error,
 *   not OK (see {@link endedAsTheServerEndedIt}).
 */
export function servedOnConnect(service: DescService, impl: AnyServiceImpl): AnyServiceImpl {
  const out: AnyServiceImpl = { ...impl };
  for (const method of service.methods) {
    const fn = impl[method.localName];
    if (fn === undefined) continue;
    if (method.methodKind === "unary") {
      const read = readOnlyMethod(method.name);
      out[method.localName] = async (request: unknown, context: HandlerContext) => {
        const answer: unknown = await fn(request, context);
        if (binaryCaller(context)) return answer;
        const bytes = preEncoded(answer);
        const message = bytes === undefined ? answer : fromBinary(method.output, bytes);
        // A write's answer is given whatever its size: the write ran (read-only-methods.ts).
        return read ? jsonSized(method, message, bytes?.byteLength) : message;
      };
    } else if (method.methodKind === "server_streaming") {
      out[method.localName] = (request: unknown, context: HandlerContext) => {
        const stream = fn(request, context) as AsyncIterable<unknown>;
        return endedAsTheServerEndedIt(binaryCaller(context) ? stream : jsonSizedStream(method, stream), context.signal);
      };
    }
  }
  return out;
}

/** `answer` of `method`, refused when its protobuf encoding (`knownBytes`, else measured) is over the JSON limit. */
function jsonSized(method: DescMethod, answer: unknown, knownBytes?: number): unknown {
  const bytes = knownBytes ?? toBinary(method.output, create(method.output, answer as never)).byteLength;
  if (bytes > JSON_MESSAGE_BYTES) {
    throw new ConnectError(
      `${method.parent.name}.${method.name}: the answer is ${bytes} bytes in protobuf, more than the ${JSON_MESSAGE_BYTES} bytes a JSON answer may be on this listener; ask in binary (application/proto) or over gRPC`,
      Code.ResourceExhausted,
    );
  }
  return answer;
}

async function* jsonSizedStream(method: DescMethod, stream: AsyncIterable<unknown>): AsyncIterable<unknown> {
  for await (const message of stream) yield jsonSized(method, message);
}

function binaryCaller(context: HandlerContext): boolean {
  return binaryMediaType(mediaType(context.requestHeader));
}

/**
 * `stream`, ended with the reason of `signal` (the handler's) when that
 * reason is one the client must hear: the call's deadline passed
 * (DEADLINE_EXCEEDED) or the server is shutting down (UNAVAILABLE,
 * connect-calls.ts). connect-es aborts a handler's signal for either but
 * leaves ending the call to the handler, and a stream that just stopped on
 * the abort (every server stream here does) would end OK: a clean end a
 * follower would take for the log's real end (wire-contract.md section 3.6:
 * a follow stays open until the client cancels). A client's cancellation
 * keeps its own end. On the gRPC listener grpc-js ends a call at its
 * deadline itself and grpc-adapter.ts ends streams UNAVAILABLE at shutdown.
 *
 * @throws ConnectError DEADLINE_EXCEEDED or UNAVAILABLE: the signal's reason, once `stream` has ended.
 */
async function* endedAsTheServerEndedIt(stream: AsyncIterable<unknown>, signal: AbortSignal): AsyncIterable<unknown> {
  yield* stream;
  const reason: unknown = signal.aborted ? signal.reason : undefined;
  if (reason instanceof ConnectError && (reason.code === Code.DeadlineExceeded || reason.code === Code.Unavailable)) throw reason;
}
