/**
 * A loop of large Saves in a worker thread of the benchmark process, so that
 * encoding and sending 64 MiB does not stall the event loop that measures
 * the small calls beside it.
 */
import { Worker, isMainThread, parentPort, workerData } from "node:worker_threads";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { rawGrpcClient, rawUnary } from "../../test/helpers/raw-grpc.js";

/** A running loop of Saves. */
export interface SaveLoop {
  /** Resolves once the first Save has been sent. */
  started: Promise<void>;
  /** Lets the Save in flight finish, ends the loop; resolves to the number of Saves completed. */
  stop(): Promise<number>;
}

/** Starts saving `bytes` bytes to one session of the server at `address`, one Save after another. */
export function startSaveLoop(address: string, bytes: number): SaveLoop {
  const worker = new Worker(new URL(import.meta.url), { workerData: { address, bytes } });
  const done = new Promise<number>((resolve, reject) => {
    worker.on("message", (m: { saves?: number }) => {
      if (m.saves !== undefined) resolve(m.saves);
    });
    worker.once("error", reject);
  });
  const started = new Promise<void>((resolve) => worker.once("message", () => resolve()));
  return {
    started,
    async stop() {
      worker.postMessage("stop");
      const saves = await done;
      await worker.terminate();
      return saves;
    },
  };
}

if (!isMainThread && (workerData as { bytes?: number })?.bytes !== undefined) {
  const { address, bytes } = workerData as { address: string; bytes: number };
  const store = rawGrpcClient(SessionStoreService, address);
  const payload = Buffer.alloc(bytes, 0x61);
  let stopping = false;
  parentPort!.on("message", () => (stopping = true));
  let saves = 0;
  parentPort!.postMessage({ started: true });
  while (!stopping) {
    await rawUnary(store, SessionStoreService.method.save, { sessionId: "large", snapshot: { format: "sessnap-json/1", payload } });
    saves++;
  }
  store.close();
  parentPort!.postMessage({ saves });
}
