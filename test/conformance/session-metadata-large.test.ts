/**
 * The projection of large payloads on every backend (issue 12): a payload
 * over 1 MiB is projected on the projection worker while it is staged, and
 * everything issue 12 promises still holds. A payload whose leading `id`
 * names another session is refused INVALID_ARGUMENT naming both before
 * anything is staged; one the projection refuses further in (a later `id`
 * member, a bad incarnation) is refused with the field named and nothing
 * visible, its staging removed; a later `id` member naming this session wins
 * over a leading one, as in Go's decoder; an accepted payload is stored
 * verbatim with the same row a small payload with the same fields gets.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import Database from "better-sqlite3";
import { Code, type Client } from "@connectrpc/connect";
import type { Redis } from "ioredis";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { conformanceBackends, type BackendSetup, type TestBackend } from "../helpers/backends.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { grpcClient } from "../helpers/clients.js";
import { expectCode } from "../helpers/errors.js";
import { waitFor } from "../helpers/wait.js";
import { sessnap, sessnapObject, type TestSession } from "../helpers/sessnap.js";

const FORMAT = "sessnap-json/1";
const MiB = 1024 * 1024;
const owner = { Issuer: "https://issuer.example", Subject: "large" };
const owned = { limit: 100, ownershipEnforced: true, ownerIssuer: owner.Issuer, ownerSubject: owner.Subject };

/** A session of about 3 MiB (its messages), owned by {@link owner}; the last message is a genuine prompt. */
function large(s: Omit<TestSession, "owner" | "messages">): TestSession {
  return { ...s, owner, messages: [{ role: "assistant", text: "x".repeat(3 * MiB) }, { role: "user", text: "a real prompt" }] };
}

/** The JSON text of `s` with `extra` (raw JSON members) appended after its last member. */
function withTrailing(s: TestSession, extra: string): Buffer {
  const text = JSON.stringify(sessnapObject(s));
  return Buffer.from(`${text.slice(0, -1)},${extra}}`);
}

const same = (a: Uint8Array | undefined, b: Uint8Array) => a !== undefined && Buffer.from(a).equals(Buffer.from(b));

describe.each(conformanceBackends())("large payloads projected while staged on $name", (backend: TestBackend) => {
  let setup: BackendSetup;
  let server: ServerProcess;
  let client: Client<typeof SessionStoreService>;
  beforeAll(async () => {
    setup = await backend.setup();
    server = await startServer(["session-store", "--store", setup.store]);
    client = grpcClient(SessionStoreService, server.address);
  });
  afterAll(async () => {
    await server?.stop();
    await backend.teardown();
  });

  /**
   * How many stagings this store has begun, for the backends a test can see
   * into: SQLite's `session_stages` id sequence (it never goes back), and the
   * staging commands a single Redis server was sent while `during` ran.
   * Undefined for the in-memory SQLite store and the cluster.
   */
  async function stagingsDuring(during: () => Promise<unknown>): Promise<number | undefined> {
    if (setup.store.startsWith("sqlite:") && setup.store !== "sqlite::memory:") {
      const db = new Database(setup.store.slice("sqlite:".length), { readonly: true });
      const begun = () => stagesBegun(db);
      try {
        const before = begun();
        await during();
        return begun() - before;
      } finally {
        db.close();
      }
    }
    if (setup.redis !== undefined) {
      const watcher = setup.redis.client();
      const monitor = (await watcher.monitor()) as Redis;
      let staged = 0;
      monitor.on("monitor", (_time: string, args: string[]) => {
        if (args.some((a) => a.includes(":stage:"))) staged++;
      });
      try {
        await during();
        return staged;
      } finally {
        monitor.disconnect();
        watcher.disconnect();
      }
    }
    await during();
    return undefined;
  }

  /** Staging leftovers: SQLite staged chunks not owned by a session, Redis staging lists. Undefined where the test cannot see. */
  async function leftovers(): Promise<number | undefined> {
    if (setup.store.startsWith("sqlite:") && setup.store !== "sqlite::memory:") {
      const db = new Database(setup.store.slice("sqlite:".length), { readonly: true });
      try {
        const row = db.prepare(`SELECT (SELECT count(*) FROM session_stages) + (SELECT count(*) FROM session_blob_chunks WHERE blob_id NOT IN (SELECT blob_id FROM sessions WHERE blob_id IS NOT NULL)) AS n`).get() as { n: number };
        return row.n;
      } finally {
        db.close();
      }
    }
    if (setup.redis !== undefined) {
      const r = setup.redis.client();
      try {
        return (await r.keys("*:stage:*")).length;
      } finally {
        r.disconnect();
      }
    }
    return undefined;
  }

  const save = (sessionId: string, payload: Uint8Array, activityState = "") => client.save({ sessionId, snapshot: { format: FORMAT, payload }, activityState });
  const create = (sessionId: string, payload: Uint8Array) => client.create({ sessionId, snapshot: { format: FORMAT, payload } });
  const load = async (sessionId: string) => (await client.load({ sessionId })).snapshot?.payload;
  const rows = async () => (await client.pageMetadata(owned)).sessions;

  test("an accepted large payload is stored verbatim with the row a small payload with the same fields gets", async () => {
    const fields = { id: "big-ok", title: "large and fine", kind: "subagent", relationship: { parent_session_id: "root", call_id: "c1" }, turns: 4 };
    const big = sessnap(large(fields));
    expect(big.byteLength).toBeGreaterThan(3 * MiB);
    await save("big-ok", big);
    expect(same(await load("big-ok"), big)).toBe(true);
    const small = sessnapObject({ ...fields, id: "small-ok", owner, messages: [{ role: "user", text: "a real prompt" }] });
    small.incarnation = (JSON.parse(Buffer.from(big).toString()) as { incarnation: string }).incarnation;
    await save("small-ok", Buffer.from(JSON.stringify(small)));
    const byId = new Map((await rows()).map((r) => [r.sessionId, r]));
    const strip = (id: string) => {
      const r = byId.get(id);
      return r === undefined ? undefined : { ...r, sessionId: "", modifiedAt: undefined, estimatedBytes: 0n };
    };
    expect(byId.get("big-ok")?.estimatedBytes).toBe(BigInt(big.byteLength));
    expect([byId.get("big-ok")?.title, byId.get("big-ok")?.activityState, byId.get("big-ok")?.turns]).toEqual(["large and fine", "active", 4]);
    expect(strip("big-ok")).toEqual(strip("small-ok"));
  });

  test("a large payload whose leading id names another session is refused naming both before anything is staged", async () => {
    const before = sessnap(large({ id: "lead", title: "before" }));
    await save("lead", before);
    const rowsBefore = await rows();
    const theirs = sessnap(large({ id: "theirs", title: "after" }));
    const staged = await stagingsDuring(async () => {
      const err = await expectCode(save("lead", theirs, "active"), Code.InvalidArgument, "snapshot.payload");
      expect(err.rawMessage).toContain('"lead"');
      expect(err.rawMessage).toContain('"theirs"');
      await expectCode(create("lead-new", theirs), Code.InvalidArgument, '"theirs"');
    });
    if (staged !== undefined) expect(staged).toBe(0);
    expect(same(await load("lead"), before)).toBe(true);
    await expectCode(client.load({ sessionId: "lead-new" }), Code.NotFound);
    expect(await rows()).toEqual(rowsBefore);
  });

  test("a large payload the projection refuses further in is refused naming the field; nothing is visible and its staging is removed", async () => {
    const before = sessnap(large({ id: "deep", title: "before" }));
    await save("deep", before);
    const rowsBefore = await rows();
    // A later "ID" member wins in Go's decoder: the first look at the leading id cannot see it, the projection on the worker does.
    const laterId = withTrailing(large({ id: "deep", title: "after" }), '"ID":"theirs"');
    const err = await expectCode(save("deep", laterId, "active"), Code.InvalidArgument, "snapshot.payload");
    expect(err.rawMessage).toContain('"deep"');
    expect(err.rawMessage).toContain('"theirs"');
    await expectCode(create("deep-new", laterId), Code.InvalidArgument, '"theirs"');
    const badIncarnation = withTrailing(large({ id: "deep", title: "after" }), '"incarnation":"not-an-incarnation"');
    await expectCode(save("deep", badIncarnation), Code.InvalidArgument, "incarnation");
    const badTurns = withTrailing(large({ id: "deep-new", title: "after" }), '"counters":{"Turns":"many"}');
    await expectCode(create("deep-new", badTurns), Code.InvalidArgument, "counters.Turns");

    expect(same(await load("deep"), before)).toBe(true);
    await expectCode(client.load({ sessionId: "deep-new" }), Code.NotFound);
    expect(await rows()).toEqual(rowsBefore);
    if ((await leftovers()) !== undefined) await waitFor(async () => (await leftovers()) === 0, 10_000, "the refused writes' staging to be removed");
  });

  test("a later id member naming this session wins over a leading one naming another (Go's last-wins); the payload is stored verbatim", async () => {
    const payload = withTrailing(large({ id: "someone-else", title: "last wins" }), '"Id":"last-wins"');
    await create("last-wins", payload);
    expect(same(await load("last-wins"), payload)).toBe(true);
    const row = (await rows()).find((r) => r.sessionId === "last-wins");
    expect([row?.title, row?.estimatedBytes]).toEqual(["last wins", BigInt(payload.byteLength)]);
  });
});

/** The last id `session_stages` handed out (0 before the first staging). */
function stagesBegun(db: Database.Database): number {
  const row = db.prepare(`SELECT seq FROM sqlite_sequence WHERE name = 'session_stages'`).get() as { seq: number } | undefined;
  return row?.seq ?? 0;
}
