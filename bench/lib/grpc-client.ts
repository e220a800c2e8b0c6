import * as grpc from "@grpc/grpc-js";
import { create, fromBinary, toBinary, type DescService } from "@bufbuild/protobuf";
import type { Client } from "@connectrpc/connect";

/** 64 MiB plus headroom, as the server allows (wire-contract.md section 1). */
const MAX_MESSAGE_BYTES = 65 * 1024 * 1024;

/**
 * A load-generator client for the unary methods of `service` on grpc-js,
 * shaped like a Connect `Client` (methods take a message init and return a
 * promise of the response). grpc-js costs the load generator less CPU than
 * connect-node, which matters on a 2-core machine shared with the server.
 *
 * Each client owns its own HTTP/2 connection (a local subchannel pool), so
 * N clients behave like N harness processes. Call `close()` when done.
 */
export function grpcJsClient<S extends DescService>(service: S, address: string): Client<S> & { close(): void } {
  const channel = new grpc.Client(address, grpc.credentials.createInsecure(), {
    "grpc.use_local_subchannel_pool": 1,
    "grpc.max_receive_message_length": MAX_MESSAGE_BYTES,
    "grpc.max_send_message_length": MAX_MESSAGE_BYTES,
  });
  const out: Record<string, unknown> = { close: () => channel.close() };
  for (const method of service.methods) {
    if (method.methodKind !== "unary") continue;
    const path = `/${service.typeName}/${method.name}`;
    out[method.localName] = (request: object) =>
      new Promise((resolve, reject) => {
        channel.makeUnaryRequest(
          path,
          (m: object) => Buffer.from(toBinary(method.input, create(method.input, m as Record<string, unknown>))),
          (b: Buffer) => fromBinary(method.output, b),
          request,
          (err, value) => (err ? reject(err) : resolve(value)),
        );
      });
  }
  return out as Client<S> & { close(): void };
}
