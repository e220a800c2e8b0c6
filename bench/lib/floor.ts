import * as grpc from "@grpc/grpc-js";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

/** A running floor server process and a grpc-js client for it. */
export interface TransportFloor {
  /** Sends `bytes`; the server answers an empty message. */
  sink(bytes: Buffer): Promise<Buffer>;
  /** Asks for `size` bytes; the server answers with them. */
  source(size: number): Promise<Buffer>;
  /** Process id of the floor server (for CPU metering). */
  pid: number;
  stop(): void;
}

/** Spawns bench/lib/floor-server.js and connects a grpc-js client to it. */
export async function startTransportFloor(): Promise<TransportFloor> {
  const proc = spawn(process.execPath, [fileURLToPath(new URL("./floor-server.js", import.meta.url))], { stdio: ["ignore", "pipe", "inherit"] });
  const port = await new Promise<number>((resolve) => {
    proc.stdout!.setEncoding("utf8").once("data", (line: string) => resolve((JSON.parse(line) as { port: number }).port));
  });
  const limit = 65 * 1024 * 1024;
  const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), {
    "grpc.max_receive_message_length": limit,
    "grpc.max_send_message_length": limit,
  });
  const identity = (b: Buffer) => b;
  const call = (path: string, bytes: Buffer) =>
    new Promise<Buffer>((resolve, reject) => client.makeUnaryRequest(path, identity, identity, bytes, (err, res) => (err ? reject(err) : resolve(res!))));
  return {
    sink: (bytes) => call("/bench.Floor/Sink", bytes),
    source: (size) => {
      const req = Buffer.alloc(4);
      req.writeUInt32BE(size);
      return call("/bench.Floor/Source", req);
    },
    pid: proc.pid!,
    stop() {
      client.close();
      proc.kill("SIGTERM");
    },
  };
}
