/**
 * The transport floor for benchmarks: a bare grpc-js server with the driver's
 * message limits and three unary methods that do no work of their own:
 * `Sink` takes any bytes and answers an empty message (the shape of Save and
 * Append), `Source` takes a 4-byte big-endian size and answers that many
 * bytes (the shape of Load), `Write` takes a 4-byte big-endian answer size
 * followed by any bytes and answers that many bytes (the shape of Renew).
 *
 * Run as a process: `node floor-server.js [redis-url]`; prints `{"port": N}`
 * on stdout when listening. With a Redis URL it is the Redis floor: each
 * call makes the one Redis command the least Redis-backed server would, on
 * one ioredis connection with auto-pipelining as the driver's: `Source`
 * `GETRANGE`s its answer from a 64 KiB value (so it answers at most 64 KiB;
 * a larger size fails), `Sink` `SET`s its whole request and `Write` the
 * bytes after its size (one of 64 keys, so memory stays bounded), and they
 * answer once Redis did (on a redis-server with `appendfsync always`, once
 * it is on disk). No script, no operation record, no retry, no metrics.
 */
import * as grpc from "@grpc/grpc-js";
import { Redis } from "ioredis";

const LIMIT = 65 * 1024 * 1024;
const SOURCE_BYTES = 64 * 1024;
const redisUrl = process.argv[2];
const redis = redisUrl === undefined ? undefined : new Redis(redisUrl, { enableAutoPipelining: true });
if (redis !== undefined) await redis.set("floor:source", Buffer.alloc(SOURCE_BYTES, 7));
let written = 0;
/** Stores `bytes` when there is a Redis; resolves once it answered. */
const store = async (bytes: Buffer): Promise<void> => void (await redis?.set(`floor:write:${written++ % 64}`, bytes));

const server = new grpc.Server({ "grpc.max_receive_message_length": LIMIT, "grpc.max_send_message_length": LIMIT });
const identity = (b: Buffer) => b;
const unary = (path: string) => ({ path, requestStream: false, responseStream: false, requestSerialize: identity, requestDeserialize: identity, responseSerialize: identity, responseDeserialize: identity });
type Handler = (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => void;
/** Answers `cb` with what `work` resolves to, or with its error. */
const answer = (work: Promise<Buffer>, cb: grpc.sendUnaryData<Buffer>) => work.then((b) => cb(null, b), (err: Error) => cb({ code: grpc.status.UNAVAILABLE, details: err.message }));
const handlers: Record<string, Handler> = {
  sink: (call, cb) => answer(store(call.request).then(() => Buffer.alloc(0)), cb),
  source: (call, cb) => {
    const size = call.request.readUInt32BE(0);
    if (redis === undefined || size === 0) return answer(Promise.resolve(Buffer.alloc(size, 7)), cb);
    if (size > SOURCE_BYTES) return answer(Promise.reject(new Error(`the Redis floor answers at most ${SOURCE_BYTES} bytes, not ${size}`)), cb);
    answer(redis.getrangeBuffer("floor:source", 0, size - 1), cb);
  },
  write: (call, cb) => answer(store(call.request.subarray(4)).then(() => Buffer.alloc(call.request.readUInt32BE(0), 7)), cb),
};
server.addService({ sink: unary("/bench.Floor/Sink"), source: unary("/bench.Floor/Source"), write: unary("/bench.Floor/Write") }, handlers);
server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, port) => {
  if (err) throw err;
  process.stdout.write(`${JSON.stringify({ port })}\n`);
});
process.on("SIGTERM", () => {
  server.forceShutdown();
  redis?.disconnect();
});
