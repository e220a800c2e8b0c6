import * as grpc from "@grpc/grpc-js";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

/** A running floor server process (bench/lib/floor-server.ts) and a grpc-js client for it. */
export interface TransportFloor {
  /** Sends `bytes`; the server answers an empty message (the Redis floor after storing them). */
  sink(bytes: Buffer): Promise<Buffer>;
  /** Asks for `size` bytes; the server answers with them (the Redis floor reads them from Redis: at most 64 KiB). */
  source(size: number): Promise<Buffer>;
  /** Sends `bytes`; the server answers `answerSize` bytes (the Redis floor after storing them). */
  write(bytes: Buffer, answerSize: number): Promise<Buffer>;
  /** True for the Redis floor: every call makes one Redis command. */
  stores: boolean;
  /** The floor server's `host:port`. */
  address: string;
  /** Process id of the floor server (for CPU metering). */
  pid: number;
  stop(): void;
}

/** A grpc-js client of a floor server: its three calls, and `close`. */
export type FloorClient = Pick<TransportFloor, "sink" | "source" | "write"> & { close(): void };

/** Connects a grpc-js client (the driver's 65 MiB message limits) to the floor server at `address` (`host:port`). */
export function connectFloor(address: string): FloorClient {
  const limit = 65 * 1024 * 1024;
  const client = new grpc.Client(address, grpc.credentials.createInsecure(), {
    "grpc.max_receive_message_length": limit,
    "grpc.max_send_message_length": limit,
  });
  const identity = (b: Buffer) => b;
  const call = (path: string, bytes: Buffer) =>
    new Promise<Buffer>((resolve, reject) => client.makeUnaryRequest(path, identity, identity, bytes, (err, res) => (err ? reject(err) : resolve(res!))));
  const sized = (size: number, bytes: Uint8Array = Buffer.alloc(0)) => {
    const req = Buffer.alloc(4 + bytes.length);
    req.writeUInt32BE(size);
    req.set(bytes, 4);
    return req;
  };
  return {
    sink: (bytes) => call("/bench.Floor/Sink", bytes),
    source: (size) => call("/bench.Floor/Source", sized(size)),
    write: (bytes, answerSize) => call("/bench.Floor/Write", sized(answerSize, bytes)),
    close: () => client.close(),
  };
}

/**
 * Spawns bench/lib/floor-server.js and connects a grpc-js client to it; with
 * `redisUrl`, the Redis floor (one Redis command per call, see floor-server.ts).
 */
export async function startTransportFloor(redisUrl?: string): Promise<TransportFloor> {
  const proc = spawn(process.execPath, [fileURLToPath(new URL("./floor-server.js", import.meta.url)), ...(redisUrl === undefined ? [] : [redisUrl])], { stdio: ["ignore", "pipe", "inherit"] });
  const port = await new Promise<number>((resolve) => {
    proc.stdout!.setEncoding("utf8").once("data", (line: string) => resolve((JSON.parse(line) as { port: number }).port));
  });
  const address = `127.0.0.1:${port}`;
  const client = connectFloor(address);
  return {
    ...client,
    stores: redisUrl !== undefined,
    address,
    pid: proc.pid!,
    stop() {
      client.close();
      proc.kill("SIGTERM");
    },
  };
}
