import { join } from "node:path";
import type { Client } from "@connectrpc/connect";
import type { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { PROJECT_ROOT } from "./server.js";

/**
 * The built services (`dist/`), loaded at run time: the SQLite store runs its
 * worker from the built `sqlite-worker.js`, which the TypeScript sources
 * vitest runs do not have.
 */
async function builtServices() {
  const backend = (await import(join(PROJECT_ROOT, "dist/services/storage/backend.js"))) as typeof import("../../services/storage/backend.js");
  const sessions = (await import(join(PROJECT_ROOT, "dist/services/session-store/open.js"))) as typeof import("../../services/session-store/open.js");
  const projection = (await import(join(PROJECT_ROOT, "dist/services/session-store/projection.js"))) as typeof import("../../services/session-store/projection.js");
  return { ...backend, ...sessions, ...projection };
}

/** Runs `fn` over `items` with at most `inFlight` calls at once. */
export async function inParallel<T>(items: readonly T[], inFlight: number, fn: (item: T) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < items.length) await fn(items[next++]!);
    }),
  );
}

/**
 * Saves a session with a `{}` snapshot under each of `ids`, fast, for tests
 * that need a big store. A store another process can share (an SQLite file,
 * Redis) is written through the session store's own write path from the test
 * process, many saves at once (one SQLite group commit, one Redis pipeline);
 * `sqlite::memory:` only through `client`, the server's own.
 */
export async function seedSessions(store: string, client: Client<typeof SessionStoreService>, ids: readonly string[]): Promise<void> {
  const snapshot = { format: "sessnap-json/1", payload: new TextEncoder().encode("{}") };
  if (store === "sqlite::memory:") {
    await inParallel(ids, 64, (sessionId) => client.save({ sessionId, snapshot }));
    return;
  }
  const { openBackend, closeBackend, openSessionStore, projectSnapshot } = await builtServices();
  // Seeding is not under test: a generous store timeout, so that 512 writes in flight on a
  // loaded machine are not refused by a durability check waiting behind them (half of it).
  const backend = await openBackend({ store, storeTimeoutMs: 60_000 });
  try {
    const sessions = openSessionStore(backend);
    await sessions.open();
    await inParallel(ids, 512, (id) => sessions.save(id, snapshot, projectSnapshot(id, snapshot.payload, "")));
  } finally {
    await closeBackend(backend);
  }
}
