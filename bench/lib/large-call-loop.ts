/**
 * A loop of large calls (Saves, or Loads of one large snapshot) in a worker
 * thread of the benchmark process, so that encoding, sending and decoding
 * 64 MiB does not stall the event loop that measures the small calls beside
 * it (issue 11, "big snapshots that don't stall small calls").
 */
import { Worker, isMainThread, parentPort, workerData } from "node:worker_threads";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { rawGrpcClient, rawUnary } from "../../test/helpers/raw-grpc.js";

/** Which large call the loop repeats: a Save of the payload, or a Load of it (saved once first). */
export type LargeCall = "save" | "load";

/** A running loop of large calls. */
export interface LargeCallLoop {
  /** Resolves once the first call of the loop has been sent (for Load: after the one Save before it). */
  started: Promise<void>;
  /** Lets the call in flight finish, ends the loop; resolves to the number of calls completed. */
  stop(): Promise<number>;
}

/** Starts `call`s of a `bytes`-byte snapshot against one session of the server at `address`, one after another. */
export function startLargeCallLoop(address: string, bytes: number, call: LargeCall): LargeCallLoop {
  const worker = new Worker(new URL(import.meta.url), { workerData: { address, bytes, call } });
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

if (!isMainThread && (workerData as { bytes?: number })?.bytes !== undefined) {
  const { address, bytes, call } = workerData as { address: string; bytes: number; call: LargeCall };
  const store = rawGrpcClient(SessionStoreService, address);
  const sessionId = `large-${call}`;
  const save = () => rawUnary(store, SessionStoreService.method.save, { sessionId, snapshot: { format: "sessnap-json/1", payload: Buffer.alloc(bytes, 0x61) } });
  let stopping = false;
  parentPort!.on("message", () => (stopping = true));
  if (call === "load") await save();
  let calls = 0;
  parentPort!.postMessage({ started: true });
  while (!stopping) {
    await (call === "save" ? save() : rawUnary(store, SessionStoreService.method.load, { sessionId }));
    calls++;
  }
  store.close();
  parentPort!.postMessage({ calls });
}
