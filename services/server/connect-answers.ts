import { fromBinary, type DescService } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import { preEncoded } from "../rpc/encoded-answer.js";
import type { AnyServiceImpl } from "./grpc-adapter.js";

/** Content types of the Connect listener's binary protocols (Connect, gRPC, gRPC-Web), parameters left out. */
const BINARY_CONTENT = /^application\/(proto|connect\+proto|grpc(-web)?(\+proto)?)$/i;

/**
 * `impl` as the Connect listener serves it: an answer built as wire bytes
 * (services/rpc/encoded-answer.ts) goes to a binary caller as those bytes
 * (protobuf-es writes them back as the message's unknown fields), and is
 * decoded into its message for any other caller (JSON: protobuf-es does not
 * write unknown fields into JSON). Streaming methods are left as they are.
 */
export function servedOnConnect(service: DescService, impl: AnyServiceImpl): AnyServiceImpl {
  const out: AnyServiceImpl = { ...impl };
  for (const method of service.methods) {
    const fn = impl[method.localName];
    if (method.methodKind !== "unary" || fn === undefined) continue;
    out[method.localName] = async (request: unknown, context: HandlerContext) => {
      const answer: unknown = await fn(request, context);
      const bytes = preEncoded(answer);
      return bytes === undefined || binaryCaller(context) ? answer : fromBinary(method.output, bytes);
    };
  }
  return out;
}

function binaryCaller(context: HandlerContext): boolean {
  const type = context.requestHeader.get("content-type")?.split(";")[0]?.trim() ?? "";
  return BINARY_CONTENT.test(type);
}
