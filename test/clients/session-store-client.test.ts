import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Code } from "@connectrpc/connect";
import { mkdtempSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { allBackends, type TestBackend } from "../helpers/backends.js";
import { serveDrivers } from "../helpers/driver-server.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { clockPast } from "../helpers/wait.js";
import { DriverConnections } from "../../clients/transport.js";
import { SessionStoreClient } from "../../clients/session-store-client.js";
import { InfrastructureError, SessionAlreadyExistsError, SessionNotFoundError } from "../../clients/errors.js";
import { InvalidRequestError } from "../../clients/errors.js";
import { MetadataCursorRestartError } from "../../clients/session-store-client.js";
import { newIncarnation, sessnap } from "../helpers/sessnap.js";

/** A sessnap-like payload: a JSON object whose `id` is the session id. */
function snapshot(id: string, extra: Record<string, unknown> = {}): Uint8Array {
  return new TextEncoder().encode(JSON.stringify({ id, state: "idle", messages: [], ...extra }));
}

function decode(payload: Uint8Array): { id: string; [k: string]: unknown } {
  return JSON.parse(new TextDecoder().decode(payload));
}

describe.each(allBackends())("SessionStoreClient against a real server on $name", (backend: TestBackend) => {
  const served = serveDrivers(backend, ["session-store"]);
  let client: SessionStoreClient;
  beforeAll(() => {
    client = served.clients.sessionStore!;
  });

  test("construction negotiates contract session-store/1 and every capability (2.4, issue 12)", () => {
    expect(client.capabilities).toEqual({
      contract: "session-store/1",
      list: true,
      delete: true,
      create: true,
      metadataPaging: true,
      lineage: true,
      activityProjection: true,
    });
  });

  test("save then load returns the payload verbatim", async () => {
    const payload = snapshot("s-round", { text: "héllo 🦀" });
    await client.save("s-round", payload);
    const got = await client.load("s-round");
    expect(got.format).toBe("sessnap-json/1");
    expect(Buffer.from(got.payload).equals(Buffer.from(payload))).toBe(true);
  });

  test("load of an unknown id is SessionNotFoundError naming the id (2.5, 8.7)", async () => {
    const err = await client.load("no-such-session").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SessionNotFoundError);
    expect((err as SessionNotFoundError).sessionId).toBe("no-such-session");
    expect((err as Error).message).toContain("no-such-session");
  });

  test("create of an existing id is SessionAlreadyExistsError and leaves the winner intact (2.5)", async () => {
    await client.create("s-create", snapshot("s-create", { n: 1 }));
    const err = await client.create("s-create", snapshot("s-create", { n: 2 })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SessionAlreadyExistsError);
    expect(decode((await client.load("s-create")).payload).n).toBe(1);
    await client.save("s-saved-first", snapshot("s-saved-first"));
    await expect(client.create("s-saved-first", snapshot("s-saved-first"))).rejects.toBeInstanceOf(SessionAlreadyExistsError);
  });

  test("concurrent creates of one id: exactly one wins (2.5)", async () => {
    const results = await Promise.allSettled(Array.from({ length: 8 }, (_, i) => client.create("s-race", snapshot("s-race", { i }))));
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    for (const r of results) if (r.status === "rejected") expect(r.reason).toBeInstanceOf(SessionAlreadyExistsError);
  });

  test("list carries save times; delete removes, is idempotent, and spares siblings (2.5, 8.3)", async () => {
    const before = BigInt(Date.now() - 60_000) * 1_000_000n;
    await client.save("s-list-a", snapshot("s-list-a"));
    await clockPast((await client.list()).find((r) => r.sessionId === "s-list-a")!.modifiedAt!);
    await client.save("s-list-b", snapshot("s-list-b"));
    const rows = new Map((await client.list()).map((r) => [r.sessionId, r.modifiedAt]));
    expect(rows.get("s-list-a")! > before).toBe(true);
    expect(rows.get("s-list-b")! > rows.get("s-list-a")!).toBe(true);
    await client.delete("s-list-a");
    await client.delete("s-list-a");
    await client.delete("never-existed");
    await expect(client.load("s-list-a")).rejects.toBeInstanceOf(SessionNotFoundError);
    const ids = (await client.list()).map((r) => r.sessionId);
    expect(ids).not.toContain("s-list-a");
    expect(ids).toContain("s-list-b");
  });

  test("pageMetadata walks one owner's sessions with bound cursors; a stale cursor is MetadataCursorRestartError (2.5, issue 12)", async () => {
    const owner = { issuer: "client-test", subject: "pager" };
    const principal = { Issuer: owner.issuer, Subject: owner.subject };
    for (const id of ["p-1", "p-2", "p-3"]) await client.save(id, sessnap({ id, owner: principal, messages: [{ role: "user", text: "go" }] }), { activityState: "active" });
    await client.create("p-draft", sessnap({ id: "p-draft", owner: principal }), { activityState: "draft" });
    const first = await client.pageMetadata({ limit: 3, owner, ownershipEnforced: true });
    expect(first.totalCount).toBe(4);
    expect(first.sessions.map((r) => [r.sessionId, r.activityState])).toEqual([["p-draft", "draft"], ["p-3", "active"], ["p-2", "active"]]);
    const second = await client.pageMetadata({ limit: 3, owner, ownershipEnforced: true, cursor: first.nextCursor });
    expect([second.sessions.map((r) => r.sessionId), second.nextCursor]).toEqual([["p-1"], undefined]);
    await client.save("p-1", sessnap({ id: "p-1", owner: principal }));
    await expect(client.pageMetadata({ limit: 3, owner, ownershipEnforced: true, cursor: first.nextCursor })).rejects.toBeInstanceOf(MetadataCursorRestartError);
  });

  test("readLineage returns the checked records of a root incarnation; a malformed query never reaches the wire (2.5, issue 12)", async () => {
    const rootInc = newIncarnation();
    await client.create("l-root", sessnap({ id: "l-root", kind: "main", incarnation: rootInc }));
    await client.create("l-child", sessnap({ id: "l-child", kind: "subagent", relationship: { parent_session_id: "l-root", parent_incarnation: rootInc, call_id: "c" } }));
    const r = await client.readLineage({ rootSessionId: "l-root", rootIncarnation: rootInc, limit: 10 });
    expect([r.truncated, r.records.map((x) => [x.sessionId, x.state, x.kind])]).toEqual([false, [["l-root", "retained", "main"], ["l-child", "retained", "subagent"]]]);
    await expect(client.readLineage({ rootSessionId: "l-root", rootIncarnation: "inc_nope", limit: 1 })).rejects.toBeInstanceOf(InvalidRequestError);
    await expect(client.readLineage({ rootSessionId: "l-root", rootIncarnation: rootInc, limit: 257 })).rejects.toBeInstanceOf(InvalidRequestError);
  });

  test("a blank id or empty payload never reaches the wire (8.7 nil save)", async () => {
    await expect(client.save("", snapshot(""))).rejects.toBeInstanceOf(InvalidRequestError);
    await expect(client.save("x", new Uint8Array())).rejects.toBeInstanceOf(InvalidRequestError);
  });

  test("an already aborted signal rejects with the abort reason, not an infrastructure error (8.7)", async () => {
    const ac = new AbortController();
    ac.abort();
    const err = await client.load("s-round", { signal: ac.signal }).catch((e: unknown) => e);
    expect((err as Error).name).toBe("AbortError");
    expect(err).not.toBeInstanceOf(InfrastructureError);
  });

  test.runIf(backend.name === "sqlite-memory")("16 sessions saving 3 MiB snapshots at once share one connection without ENHANCE_YOUR_CALM", async () => {
    const media = "M".repeat(3 * 1024 * 1024);
    await Promise.all(
      Array.from({ length: 16 }, async (_, i) => {
        for (let turn = 0; turn < 3; turn++) await client.save(`s-par-${i}`, snapshot(`s-par-${i}`, { turn, media }));
      }),
    );
    const loaded = await Promise.all(Array.from({ length: 16 }, (_, i) => client.load(`s-par-${i}`)));
    expect(loaded.map((l) => decode(l.payload).turn)).toEqual(Array(16).fill(2));
  });

  test.runIf(backend.name === "sqlite-memory")("a 63 MiB snapshot round-trips within the 64 MiB limit (section 1)", async () => {
    const big = snapshot("s-huge", { media: "A".repeat(63 * 1024 * 1024) });
    await client.save("s-huge", big);
    const got = await client.load("s-huge");
    expect(got.payload.byteLength).toBe(big.byteLength);
    expect(Buffer.from(got.payload).equals(Buffer.from(big))).toBe(true);
  });
});

describe("SessionStoreClient with a token-protected server", () => {
  let server: ServerProcess;
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "mecatl-token-"));
    writeFileSync(join(dir, "tokens"), "tok-123\n");
    server = await startServer(["session-store", "--store", "sqlite::memory:", "--auth-token-file", join(dir, "tokens")]);
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test("the bearer token reaches the server and construction succeeds (6, 8.15)", async () => {
    const connections = new DriverConnections({ authToken: "tok-123" });
    try {
      const client = await SessionStoreClient.connect(connections.transport(server.address));
      await client.save("t1", snapshot("t1"));
      expect(decode((await client.load("t1")).payload).id).toBe("t1");
    } finally {
      connections.close();
    }
  });

  test("without the token, construction fails closed with UNAUTHENTICATED (6)", async () => {
    const connections = new DriverConnections();
    try {
      const err = await SessionStoreClient.connect(connections.transport(server.address)).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(InfrastructureError);
      expect((err as InfrastructureError).code).toBe(Code.Unauthenticated);
    } finally {
      connections.close();
    }
  });
});
