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

/** The outcome of {@link callWithBytes}: the status and every response message, undecoded. */
export interface RawBytesOutcome {
  code: grpc.status;
  details: string;
  messages: Buffer[];
  /** True when the call was cancelled by `endAfter` (its code is then CANCELLED). */
  cancelledByClient: boolean;
}

/**
 * Sends `bytes` as the request message of `path` (`/package.Service/Method`)
 * without encoding or checking them, so a test can send what no generated
 * client would: truncated, bit-flipped or otherwise malformed protobuf.
 * Responses are kept as bytes.
 *
 * @param options.streaming true for a server-streaming method.
 * @param options.deadlineMs gRPC deadline from now (default 30 s).
 * @param options.endAfter for streams that may never end (follow, Watch):
 *   called with each message so far; return true to cancel the call.
 * @param options.idleMs for such streams: cancel when no message arrived for
 *   this many milliseconds (a follow stream with nothing to send).
 */
export function callWithBytes(
  client: grpc.Client,
  path: string,
  bytes: Uint8Array,
  options: { streaming?: boolean; deadlineMs?: number; endAfter?: (messages: Buffer[]) => boolean; idleMs?: number } = {},
): Promise<RawBytesOutcome> {
  const serialize = (b: Uint8Array) => Buffer.from(b.buffer, b.byteOffset, b.byteLength);
  const deserialize = (b: Buffer) => b;
  const deadline = Date.now() + (options.deadlineMs ?? 30_000);
  return new Promise((resolve) => {
    const messages: Buffer[] = [];
    if (options.streaming !== true) {
      client.makeUnaryRequest(path, serialize, deserialize, bytes, new grpc.Metadata(), { deadline }, (err, res) => {
        if (res !== undefined) messages.push(res);
        resolve({ code: err?.code ?? grpc.status.OK, details: err?.details ?? "", messages, cancelledByClient: false });
      });
      return;
    }
    const call = client.makeServerStreamRequest(path, serialize, deserialize, bytes, new grpc.Metadata(), { deadline });
    let cancelledByClient = false;
    let idle: NodeJS.Timeout | undefined;
    const cancel = () => {
      cancelledByClient = true;
      call.cancel();
    };
    const armIdle = () => {
      if (options.idleMs === undefined) return;
      clearTimeout(idle);
      idle = setTimeout(cancel, options.idleMs);
    };
    armIdle();
    call.on("data", (m: Buffer) => {
      messages.push(m);
      armIdle();
      if (options.endAfter?.(messages) === true) cancel();
    });
    call.on("error", () => undefined);
    call.on("status", (s: grpc.StatusObject) => {
      clearTimeout(idle);
      resolve({ code: s.code, details: s.details, messages, cancelledByClient });
    });
  });
}
