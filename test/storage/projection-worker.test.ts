/**
 * The projection worker (issue 12, services/session-store/projection-thread.ts)
 * failing: a Save whose worker dies mid-projection fails UNAVAILABLE at once
 * (never hangs), changes nothing, and the Saves after it (waiting behind
 * it, or sent later) are projected by a new worker; on every backend. The service, the store and the worker are the built ones,
 * run in this process (a server process's worker cannot be made to die from
 * outside), called through an in-memory Connect transport. The worker dies
 * for real: its heap is capped, and the payload's title alone outgrows the cap
 * when the projection decodes it.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from "vitest";
import { Code, createClient, createRouterTransport, type Client } from "@connectrpc/connect";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { allBackends, type BackendSetup, type TestBackend } from "../helpers/backends.js";
import { PROJECT_ROOT } from "../helpers/server.js";
import { expectCode } from "../helpers/errors.js";
import { sessnap, sessnapObject } from "../helpers/sessnap.js";

const built = async <T>(path: string): Promise<T> => (await import(pathToFileURL(join(PROJECT_ROOT, "dist", path)).href)) as T;
const { ProjectionThread } = await built<typeof import("../../services/session-store/projection-thread.js")>("services/session-store/projection-thread.js");
const { sessionStoreService } = await built<typeof import("../../services/session-store/service.js")>("services/session-store/service.js");
const { openSessionStore } = await built<typeof import("../../services/session-store/open.js")>("services/session-store/open.js");
const { openBackend, closeBackend } = await built<typeof import("../../services/storage/backend.js")>("services/storage/backend.js");
const { SessionStoreService } = await built<typeof import("../../gen/mecatl/driver/v1/session_store_pb.js")>("gen/mecatl/driver/v1/session_store_pb.js");

const FORMAT = "sessnap-json/1";
const MiB = 1024 * 1024;
const owner = { Issuer: "https://issuer.example", Subject: "worker" };

/** A valid session of about 3 MiB titled `title`. */
const large = (title: string) => sessnap({ id: "s", title, owner, messages: [{ role: "assistant", text: "x".repeat(3 * MiB) }, { role: "user", text: "go" }] });

describe.each(allBackends())("the projection worker dying mid-Save on $name", (backend: TestBackend) => {
  let setup: BackendSetup;
  let opened: Awaited<ReturnType<typeof openBackend>>;
  let client: Client<typeof SessionStoreService>;
  let thread: InstanceType<typeof ProjectionThread>;
  beforeAll(async () => {
    setup = await backend.setup();
    opened = await openBackend({ store: setup.store });
    const store = openSessionStore(opened);
    await store.open();
    // A heap far too small for the title below, ample for a projection that only skims.
    thread = new ProjectionThread({ maxOldGenerationSizeMb: 8, maxYoungGenerationSizeMb: 2 });
    const service = sessionStoreService(store, thread);
    client = createClient(SessionStoreService, createRouterTransport(({ service: add }) => add(SessionStoreService, service)));
  });
  afterEach(async () => {
    expect(thread.inFlight).toBe(0);
  });
  afterAll(async () => {
    await thread?.stop();
    if (opened !== undefined) await closeBackend(opened);
    await backend.teardown();
  });

  test("the Save fails UNAVAILABLE naming the worker, nothing changes, and the next Save starts a new worker", async () => {
    const before = large("before");
    await client.save({ sessionId: "s", snapshot: { format: FORMAT, payload: before }, activityState: "active" });
    const owned = { limit: 10, ownershipEnforced: true, ownerIssuer: owner.Issuer, ownerSubject: owner.Subject };
    const rowsBefore = (await client.pageMetadata(owned)).sessions;
    expect(rowsBefore.map((r) => r.title)).toEqual(["before"]);

    // 12 Mi two-byte characters: a 24 MiB string once decoded, three times the worker's heap.
    const oversized = Buffer.from(JSON.stringify(sessnapObject({ id: "s", title: "\u00e9".repeat(12 * MiB), owner })));
    const err = await expectCode(client.save({ sessionId: "s", snapshot: { format: FORMAT, payload: oversized }, activityState: "active" }), Code.Unavailable, "projection worker");
    expect(err.rawMessage).toContain("nothing was written");
    await expectCode(client.create({ sessionId: "other", snapshot: { format: FORMAT, payload: Buffer.from(JSON.stringify(sessnapObject({ id: "other", title: "\u00e9".repeat(12 * MiB) }))) } }), Code.Unavailable);

    expect(Buffer.from((await client.load({ sessionId: "s" })).snapshot!.payload).equals(Buffer.from(before))).toBe(true);
    await expectCode(client.load({ sessionId: "other" }), Code.NotFound);
    expect((await client.pageMetadata(owned)).sessions).toEqual(rowsBefore);

    const after = large("after");
    await client.save({ sessionId: "s", snapshot: { format: FORMAT, payload: after }, activityState: "active" });
    expect(Buffer.from((await client.load({ sessionId: "s" })).snapshot!.payload).equals(Buffer.from(after))).toBe(true);
    expect((await client.pageMetadata(owned)).sessions.map((r) => r.title)).toEqual(["after"]);
  });

  test("a Save whose projection waited behind the one that killed the worker is projected by a new worker", async () => {
    const killer = Buffer.from(JSON.stringify(sessnapObject({ id: "killer", title: "\u00e9".repeat(12 * MiB) })));
    const innocent = sessnap({ id: "innocent", title: "waited", owner, messages: [{ role: "assistant", text: "y".repeat(3 * MiB) }] });
    const [killed, saved] = await Promise.allSettled([
      client.save({ sessionId: "killer", snapshot: { format: FORMAT, payload: killer } }),
      client.save({ sessionId: "innocent", snapshot: { format: FORMAT, payload: innocent } }),
    ]);
    expect(killed.status === "rejected" && (killed.reason as { code?: Code }).code).toBe(Code.Unavailable);
    expect(saved.status).toBe("fulfilled");
    expect(Buffer.from((await client.load({ sessionId: "innocent" })).snapshot!.payload).equals(Buffer.from(innocent))).toBe(true);
    await expectCode(client.load({ sessionId: "killer" }), Code.NotFound);
  });
});
