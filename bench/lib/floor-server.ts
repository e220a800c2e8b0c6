/**
 * The transport floor for benchmarks: a bare grpc-js server with the driver's
 * message limits and two unary methods that do no work: `Sink` takes any
 * bytes and answers an empty message (the shape of Save), `Source` takes a
 * 4-byte big-endian size and answers that many bytes (the shape of Load).
 * Run as a process; prints `{"port": N}` on stdout when listening.
 */
import * as grpc from "@grpc/grpc-js";

const LIMIT = 65 * 1024 * 1024;
const server = new grpc.Server({ "grpc.max_receive_message_length": LIMIT, "grpc.max_send_message_length": LIMIT });
const identity = (b: Buffer) => b;
server.addService(
  {
    sink: { path: "/bench.Floor/Sink", requestStream: false, responseStream: false, requestSerialize: identity, requestDeserialize: identity, responseSerialize: identity, responseDeserialize: identity },
    source: { path: "/bench.Floor/Source", requestStream: false, responseStream: false, requestSerialize: identity, requestDeserialize: identity, responseSerialize: identity, responseDeserialize: identity },
  },
  {
    sink: (_call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, Buffer.alloc(0)),
    source: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, Buffer.alloc(call.request.readUInt32BE(0), 7)),
  },
);
server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, port) => {
  if (err) throw err;
  process.stdout.write(`${JSON.stringify({ port })}\n`);
});
process.on("SIGTERM", () => server.forceShutdown());
