/**
 * A loop of large calls (Saves, or Loads of one large snapshot) in a worker
 * thread of the benchmark process, so that encoding, sending and decoding
 * 64 MiB does not stall the event loop that measures the small calls beside
 * it (issue 11, "big snapshots that don't stall small calls").
 */
import { Worker, isMainThread, parentPort, workerData } from "node:worker_threads";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { rawGrpcClient, rawUnary } from "../../test/helpers/raw-grpc.js";
import { connectFloor } from "./floor.js";

/** Which large call the loop repeats: a Save of the payload, or a Load of the snapshot {@link saveLoadedSnapshot} saved. */
export type LargeCall = "save" | "load";

/** A running loop of large calls. */
export interface LargeCallLoop {
  /** Resolves once the first call of the loop has been sent. */
  started: Promise<void>;
  /** Lets the call in flight finish, ends the loop; resolves to the number of calls completed. */
  stop(): Promise<number>;
}

/** The session a loop of Loads reads. */
const LOADED_SESSION = "large-load";

/**
 * Saves the `bytes`-byte snapshot that a loop of Loads reads, once per
 * server before any measurement: the Save, its checkpoint and the space it
 * reclaims afterwards are then not charged to the Renews measured beside
 * the Loads (they are what the loop of Saves measures).
 */
export async function saveLoadedSnapshot(address: string, bytes: number): Promise<void> {
  const store = rawGrpcClient(SessionStoreService, address);
  try {
    await rawUnary(store, SessionStoreService.method.save, { sessionId: LOADED_SESSION, snapshot: { format: "sessnap-json/1", payload: Buffer.alloc(bytes, 0x61) } });
  } finally {
    store.close();
  }
}

/**
 * Starts `call`s of a `bytes`-byte snapshot against one session of the
 * server at `address`, one after another; with `floor`, against the
 * transport floor at `address` (bench/lib/floor-server.ts) instead: a Save
 * is a `Sink` of `bytes` bytes, a Load a `Source` of `bytes` bytes.
 */
export function startLargeCallLoop(address: string, bytes: number, call: LargeCall, floor = false): LargeCallLoop {
  const worker = new Worker(new URL(import.meta.url), { workerData: { address, bytes, call, floor } });
  const done = new Promise<number>((resolve, reject) => {
    worker.on("message", (m: { calls?: number }) => {
      if (m.calls !== undefined) resolve(m.calls);
    });
    worker.once("error", reject);
  });
  const started = new Promise<void>((resolve) => worker.once("message", () => resolve()));
  return {
    started,
    async stop() {
      worker.postMessage("stop");
      const calls = await done;
      await worker.terminate();
      return calls;
    },
  };
}

/** The driver's large call: a Save of `bytes` payload bytes, or a Load of the snapshot {@link saveLoadedSnapshot} saved. */
function driverCalls(address: string, bytes: number, call: LargeCall): { client: { close(): void }; once: () => Promise<unknown> } {
  const client = rawGrpcClient(SessionStoreService, address);
  const sessionId = call === "load" ? LOADED_SESSION : "large-save";
  const save = () => rawUnary(client, SessionStoreService.method.save, { sessionId, snapshot: { format: "sessnap-json/1", payload: Buffer.alloc(bytes, 0x61) } });
  return { client, once: call === "save" ? save : () => rawUnary(client, SessionStoreService.method.load, { sessionId }) };
}

/** The transport floor's large call of the same shape: `Sink` of `bytes` bytes for a Save, `Source` of `bytes` bytes for a Load. */
function floorCalls(address: string, bytes: number, call: LargeCall): { client: { close(): void }; once: () => Promise<unknown> } {
  const client = connectFloor(address);
  return { client, once: call === "save" ? () => client.sink(Buffer.alloc(bytes, 0x61)) : () => client.source(bytes) };
}

if (!isMainThread && (workerData as { bytes?: number })?.bytes !== undefined) {
  const { address, bytes, call, floor } = workerData as { address: string; bytes: number; call: LargeCall; floor: boolean };
  const { client, once } = floor ? floorCalls(address, bytes, call) : driverCalls(address, bytes, call);
  let stopping = false;
  parentPort!.on("message", () => (stopping = true));
  let calls = 0;
  parentPort!.postMessage({ started: true });
  while (!stopping) {
    await once();
    calls++;
  }
  client.close();
  parentPort!.postMessage({ calls });
}
