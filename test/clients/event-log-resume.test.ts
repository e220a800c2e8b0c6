import { afterAll, afterEach, describe, expect, test } from "vitest";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { conformanceBackends, type TestBackend } from "../helpers/backends.js";
import { grpcTransport } from "../helpers/clients.js";
import { EventLogClient } from "../../clients/event-log-client.js";
import { SessionStoreClient } from "../../clients/session-store-client.js";
import { followResuming } from "../../clients/event-log-resume.js";
import { CursorExpiredError, InfrastructureError } from "../../clients/errors.js";

/** The `n` of each event record of `records`. */
const ns = (records: Array<{ kind: string; payload?: Uint8Array }>) => records.map((r) => (JSON.parse(Buffer.from(r.payload!).toString("utf8")) as { n: number }).n);

/**
 * followResuming (clients/event-log-resume.ts): a follow that outlives its
 * stream. A resume reads strictly after the last record delivered
 * (wire-contract.md section 3.6), so across cuts nothing is skipped or
 * repeated and `limit` counts the whole follow; an end that cannot be
 * resumed (cursor_expired, section 3.7) is thrown at once.
 */
describe.each(conformanceBackends())("followResuming, on $name", (backend: TestBackend) => {
  let server: ServerProcess | undefined;
  afterEach(async () => {
    await server?.stop();
  });
  afterAll(() => backend.teardown());

  test("a limit counts the records of every stream, across --max-connection-age cuts", async () => {
    const { store, args } = await backend.setup();
    server = await startServer(["--store", store, ...args, "--max-connection-age", "1s", "--max-connection-age-grace", "100ms"]);
    const log = new EventLogClient(grpcTransport(server.address));
    const interruptions: string[] = [];
    const reading = (async () => {
      const got = [];
      for await (const r of followResuming(log, "limited", { limit: 12, onInterrupted: (err, cursor) => interruptions.push(`${err.code} after ${cursor}`) })) got.push(r);
      return got;
    })();
    for (let n = 1; n <= 15; n++) {
      await log.append("limited", JSON.stringify({ n }));
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    const got = await reading;
    expect(ns(got)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
    // 3 s of appends under a 1 s connection age: the stream was cut at least once, and each resume named the cursor it read after.
    expect(interruptions.length).toBeGreaterThan(0);
    for (const line of interruptions) expect(got.map((r) => `14 after ${r.cursor}`)).toContain(line);
  });

  test("cursor_expired (the log was deleted) is thrown, not resumed; aborting ends the follow cleanly", async () => {
    const { store, args } = await backend.setup();
    server = await startServer(["--store", store, ...args]);
    const log = new EventLogClient(grpcTransport(server.address));
    const sessions = await SessionStoreClient.connect(grpcTransport(server.address));
    await log.append("expired", JSON.stringify({ n: 1 }));
    const got: number[] = [];
    const reading = (async () => {
      for await (const r of followResuming(log, "expired", { onInterrupted: () => got.push(-1) })) got.push(...ns([r]));
    })().then(
      () => undefined,
      (err: unknown) => err,
    );
    while (got.length === 0) await new Promise((resolve) => setTimeout(resolve, 20));
    await sessions.delete("expired");
    expect(await reading).toBeInstanceOf(CursorExpiredError);
    expect(got).toEqual([1]);

    const stop = new AbortController();
    const parked = (async () => {
      const seen = [];
      for await (const r of followResuming(log, "expired", { signal: stop.signal })) seen.push(r);
      return seen;
    })();
    setTimeout(() => stop.abort(), 200);
    expect(await parked).toEqual([]);
  });

  test("the first open is not retried: a target where nothing listens fails at once", async () => {
    const { store, args } = await backend.setup();
    server = await startServer(["--store", store, ...args]);
    const address = server.address;
    await server.stop();
    server = undefined;
    const started = Date.now();
    const follow = followResuming(new EventLogClient(grpcTransport(address)), "nobody")[Symbol.asyncIterator]();
    const err = await follow.next().then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(InfrastructureError);
    expect(Date.now() - started).toBeLessThan(5_000);
  });
});
