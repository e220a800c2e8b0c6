/**
 * A loop of large calls (Saves, or Loads of one large snapshot) in a child
 * process of the benchmark, so that encoding, sending and decoding 64 MiB
 * does not stall the event loop that measures the small calls beside it
 * (issue 11, "big snapshots that don't stall small calls"). A process, not a
 * worker thread: a worker shares its process's garbage-collection helper
 * threads, and its collections of 64 MiB messages held the measuring
 * thread's own young-generation collections for 10-20 ms (GC observer in
 * both, bench/RESULTS.md), which the Renews measured beside them, and the
 * ones measured just after, were charged with.
 */
import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";
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
  const child = fork(fileURLToPath(import.meta.url), [JSON.stringify({ address, bytes, call, floor } satisfies LoopSettings)], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const done = new Promise<number>((resolve, reject) => {
    child.on("message", (m: { calls?: number }) => {
      if (m.calls !== undefined) resolve(m.calls);
    });
    child.once("error", reject);
    child.once("exit", (code) => reject(new Error(`the large-call loop exited with code ${code} before reporting`)));
  });
  done.catch(() => undefined);
  const started = new Promise<void>((resolve, reject) => {
    child.once("message", () => resolve());
    child.once("exit", (code) => reject(new Error(`the large-call loop exited with code ${code} before starting`)));
  });
  return {
    started,
    async stop() {
      child.send("stop");
      const calls = await done;
      child.disconnect();
      await exited;
      return calls;
    },
  };
}

/** What the loop's process is started with (its one argument, as JSON). */
interface LoopSettings {
  address: string;
  bytes: number;
  call: LargeCall;
  floor: boolean;
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

if (process.send !== undefined && process.argv[1] === fileURLToPath(import.meta.url)) {
  const { address, bytes, call, floor } = JSON.parse(process.argv[2]!) as LoopSettings;
  const { client, once } = floor ? floorCalls(address, bytes, call) : driverCalls(address, bytes, call);
  let stopping = false;
  process.on("message", () => (stopping = true));
  let calls = 0;
  process.send({ started: true });
  while (!stopping) {
    await once();
    calls++;
  }
  client.close();
  process.send({ calls }, () => process.exit(0));
}
