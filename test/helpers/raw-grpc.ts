import * as grpc from "@grpc/grpc-js";
import { create, fromBinary, toBinary, type DescMethod, type DescService, type MessageInitShape, type MessageShape, type DescMessage } from "@bufbuild/protobuf";
import { MAX_MESSAGE_BYTES } from "./clients.js";

/**
 * A plain grpc-js client (no Connect) for one service, with protobuf-es
 * (de)serialisers: the same stack a grpc-js user would run. `target` is any
 * grpc-js target (`host:port`, `unix:/path`). `options` adds channel options,
 * e.g. `{"grpc.use_local_subchannel_pool": 1}` for a connection of its own
 * (grpc-js otherwise shares one connection among clients of one target).
 */
export function rawGrpcClient(service: DescService, target: string, credentials = grpc.credentials.createInsecure(), options: grpc.ChannelOptions = {}): grpc.Client {
  const definition: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
  for (const m of service.methods) {
    definition[m.localName] = {
      path: `/${service.typeName}/${m.name}`,
      requestStream: false,
      responseStream: m.methodKind === "server_streaming",
      requestSerialize: (msg: unknown) => Buffer.from(toBinary(m.input, msg as never)),
      requestDeserialize: (b: Buffer) => fromBinary(m.input, b),
      responseSerialize: (msg: unknown) => Buffer.from(toBinary(m.output, msg as never)),
      responseDeserialize: (b: Buffer) => fromBinary(m.output, b),
    };
  }
  const Ctor = grpc.makeGenericClientConstructor(definition, service.name);
  return new Ctor(target, credentials, {
    "grpc.max_receive_message_length": MAX_MESSAGE_BYTES,
    "grpc.max_send_message_length": MAX_MESSAGE_BYTES,
    ...options,
  });
}

/** Calls a unary method on a {@link rawGrpcClient}, resolving to the decoded response. */
export function rawUnary<I extends DescMessage, O extends DescMessage>(
  client: grpc.Client,
  method: DescMethod & { input: I; output: O },
  request: MessageInitShape<I>,
  metadata = new grpc.Metadata(),
): Promise<MessageShape<O>> {
  return new Promise((resolve, reject) => {
    const fn = (client as unknown as Record<string, Function>)[method.localName]!;
    fn.call(client, create(method.input, request), metadata, (err: grpc.ServiceError | null, res: MessageShape<O>) => (err ? reject(err) : resolve(res)));
  });
}
