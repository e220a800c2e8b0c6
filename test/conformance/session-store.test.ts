import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Code, type Client } from "@connectrpc/connect";
import { randomBytes } from "node:crypto";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { conformanceBackends, type TestBackend } from "../helpers/backends.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { grpcClient } from "../helpers/clients.js";
import { expectCode } from "../helpers/errors.js";
import { clockPast } from "../helpers/wait.js";

const FORMAT = "sessnap-json/1";

function snap(text: string | Uint8Array) {
  return { format: FORMAT, payload: typeof text === "string" ? new TextEncoder().encode(text) : text };
}

describe.each(conformanceBackends())("SessionStoreService on $name", (backend: TestBackend) => {
  let server: ServerProcess;
  let client: Client<typeof SessionStoreService>;
  let store: string;

  beforeAll(async () => {
    ({ store } = await backend.setup());
    server = await startServer(["session-store", "--store", store, "--store-timeout", "30s"]); // 64 MiB snapshots on a loaded machine
    client = grpcClient(SessionStoreService, server.address);
  });
  afterAll(async () => {
    await server?.stop();
    await backend.teardown();
  });

  test("Capabilities names contract session-store/1 with every capability (2.4, issue 12)", async () => {
    const caps = await client.capabilities({});
    expect(caps.contract).toBe("session-store/1");
    expect([caps.list, caps.delete, caps.create]).toEqual([true, true, true]);
    expect([caps.metadataPaging, caps.lineage, caps.activityProjection]).toEqual([true, true, true]);
  });

  test("save then load returns the snapshot byte for byte (8.2)", async () => {
    const payload = randomBytes(4096);
    await client.save({ sessionId: "round-trip", snapshot: snap(payload) });
    const got = await client.load({ sessionId: "round-trip" });
    expect(got.snapshot?.format).toBe(FORMAT);
    expect(Buffer.from(got.snapshot!.payload).equals(payload)).toBe(true);
  });

  test("a later save replaces the earlier one (8.2 overwrite)", async () => {
    await client.save({ sessionId: "overwrite", snapshot: snap("first") });
    await client.save({ sessionId: "overwrite", snapshot: snap("second") });
    const got = await client.load({ sessionId: "overwrite" });
    expect(new TextDecoder().decode(got.snapshot!.payload)).toBe("second");
  });

  test("two sessions are keyed by id, not by last save (8.2)", async () => {
    await client.save({ sessionId: "pair-a", snapshot: snap("A") });
    await client.save({ sessionId: "pair-b", snapshot: snap("B") });
    expect(new TextDecoder().decode((await client.load({ sessionId: "pair-a" })).snapshot!.payload)).toBe("A");
    expect(new TextDecoder().decode((await client.load({ sessionId: "pair-b" })).snapshot!.payload)).toBe("B");
  });

  test("long and opaque ids round-trip, and ids differing only in the last byte never alias (8.2)", async () => {
    const ids = [175, 176, 241, 1024, 4096].map((n) => "x".repeat(n - 1) + "z");
    ids.push("é-ünïcödé-🦀-\u0000-nul-{brace}-tag", "with spaces and / slashes : colons");
    const base = "t".repeat(220);
    ids.push(`${base}a`, `${base}b`);
    for (const [i, id] of ids.entries()) await client.save({ sessionId: id, snapshot: snap(`payload-${i}`) });
    for (const [i, id] of ids.entries()) {
      expect(new TextDecoder().decode((await client.load({ sessionId: id })).snapshot!.payload)).toBe(`payload-${i}`);
    }
    await client.save({ sessionId: ids[3]!, snapshot: snap("re-saved") });
    expect(new TextDecoder().decode((await client.load({ sessionId: ids[3]! })).snapshot!.payload)).toBe("re-saved");
  });

  test("a 64 MiB snapshot round-trips (8.2 large snapshot, section 1 message size)", async () => {
    // As large as the harness can Load: its 64 MiB limit covers the whole answer, envelope included.
    const payload = randomBytes(64 * 1024 * 1024 - 64);
    await client.save({ sessionId: "huge", snapshot: snap(payload) });
    const got = await client.load({ sessionId: "huge" });
    expect(got.snapshot!.payload.length).toBe(payload.length);
    expect(Buffer.from(got.snapshot!.payload).equals(payload)).toBe(true);
    await client.delete({ sessionId: "huge" });
  });

  test("Load of an unknown id is NOT_FOUND naming the id (2.5, 8.7)", async () => {
    await expectCode(client.load({ sessionId: "never-saved-42" }), Code.NotFound, "never-saved-42");
  });

  test("List returns every saved id with a save time within a minute (8.3)", async () => {
    const ids = ["subagent-conf-1", "parallel-conf-1-0", "team-conf-1-lead", "conf-main-1"];
    const before = Date.now();
    for (const id of ids) await client.save({ sessionId: id, snapshot: snap(id) });
    const after = Date.now();
    const listed = new Map((await client.list({})).sessions.map((s) => [s.sessionId, s.modifiedAt]));
    for (const id of ids) {
      const at = listed.get(id);
      expect(at, id).toBeDefined();
      const ms = Number(at!.seconds) * 1000 + at!.nanos / 1e6;
      expect(ms).toBeGreaterThan(before - 60_000);
      expect(ms).toBeLessThan(after + 60_000);
    }
  });

  test("modified_at is the save time: a save made after the clock moved on is strictly later, and Lists agree (8.3)", async () => {
    const nanos = (x: { seconds: bigint; nanos: number }) => x.seconds * 1_000_000_000n + BigInt(x.nanos);
    const listed = async () => new Map((await client.list({})).sessions.map((s) => [s.sessionId, nanos(s.modifiedAt!)]));
    await client.save({ sessionId: "order-1", snapshot: snap("1") });
    await clockPast((await listed()).get("order-1")!);
    await client.save({ sessionId: "order-2", snapshot: snap("2") });
    const first = await listed();
    expect(first.get("order-2")! > first.get("order-1")!).toBe(true);
    // A server answering "now" instead of the save time would differ once the clock has moved on.
    await clockPast(first.get("order-2")!);
    const second = await listed();
    expect([second.get("order-1"), second.get("order-2")]).toEqual([first.get("order-1"), first.get("order-2")]);
  });

  test("Delete removes from List and Load, keeps siblings, and is idempotent (8.3)", async () => {
    await client.save({ sessionId: "del-me", snapshot: snap("x") });
    await client.save({ sessionId: "del-sibling", snapshot: snap("y") });
    await client.delete({ sessionId: "del-me" });
    await expectCode(client.load({ sessionId: "del-me" }), Code.NotFound);
    const ids = (await client.list({})).sessions.map((s) => s.sessionId);
    expect(ids).not.toContain("del-me");
    expect(ids).toContain("del-sibling");
    expect(new TextDecoder().decode((await client.load({ sessionId: "del-sibling" })).snapshot!.payload)).toBe("y");
    await client.delete({ sessionId: "del-me" });
    await client.delete({ sessionId: "never-existed" });
  });

  test("Create stores a new session and collides with ALREADY_EXISTS, leaving the winner intact (8.5)", async () => {
    await client.create({ sessionId: "create-1", snapshot: snap("winner") });
    expect(new TextDecoder().decode((await client.load({ sessionId: "create-1" })).snapshot!.payload)).toBe("winner");
    const listedBefore = (await client.list({})).sessions.find((s) => s.sessionId === "create-1");
    await expectCode(client.create({ sessionId: "create-1", snapshot: snap("loser") }), Code.AlreadyExists, "create-1");
    expect(new TextDecoder().decode((await client.load({ sessionId: "create-1" })).snapshot!.payload)).toBe("winner");
    const listedAfter = (await client.list({})).sessions.find((s) => s.sessionId === "create-1");
    expect(listedAfter?.modifiedAt).toEqual(listedBefore?.modifiedAt);
  });

  test("Create against a snapshot written by Save collides (8.5)", async () => {
    await client.save({ sessionId: "saved-first", snapshot: snap("by-save") });
    await expectCode(client.create({ sessionId: "saved-first", snapshot: snap("by-create") }), Code.AlreadyExists);
    expect(new TextDecoder().decode((await client.load({ sessionId: "saved-first" })).snapshot!.payload)).toBe("by-save");
  });

  test("16 concurrent creators of one id: exactly one OK (8.5)", async () => {
    const results = await Promise.allSettled(
      Array.from({ length: 16 }, (_, i) => client.create({ sessionId: "race-1", snapshot: snap(`creator-${i}`) })),
    );
    const winners = results.flatMap((r, i) => (r.status === "fulfilled" ? [i] : []));
    expect(winners).toHaveLength(1);
    for (const r of results) if (r.status === "rejected") expect((r.reason as { code: Code }).code).toBe(Code.AlreadyExists);
    expect(new TextDecoder().decode((await client.load({ sessionId: "race-1" })).snapshot!.payload)).toBe(`creator-${winners[0]}`);
  });

  /**
   * A sessnap-json/1 payload (session-metadata.md section 1.10, main session
   * without owner) whose messages agree with `activityState`: none for
   * `draft`, one genuine user prompt for `active` (section 1.9).
   */
  function sessnap(sessionId: string, activityState: string, title = "t"): Uint8Array {
    const messages = activityState === "draft" ? [] : [{ role: "user", text: title }];
    return new TextEncoder().encode(
      JSON.stringify({
        id: sessionId,
        state: "idle",
        mode: "default",
        limits: { MaxTurns: 0, MaxToolCalls: 0, MaxConsecutiveFailures: 0 },
        counters: { Turns: messages.length, ToolCalls: 0, ConsecutiveFailures: 0 },
        created_at: "2026-06-01T12:30:45.123456789Z",
        messages,
        kind: "main",
        model_id: "anthropic/claude-3.5-sonnet",
        provider_id: "openrouter",
        title,
        token_usage: {},
      }),
    );
  }

  const ACTIVITY_STATES = ["draft", "active", ""];

  test.each(ACTIVITY_STATES)("Create and Save accept activity_state %j; Load returns the snapshot verbatim; a colliding Create changes nothing (2.6)", async (activityState) => {
    const id = `activity-${activityState || "unknown"}`;
    const created = sessnap(id, activityState, "created");
    await client.create({ sessionId: id, snapshot: snap(created), activityState });
    expect(Buffer.from((await client.load({ sessionId: id })).snapshot!.payload).equals(Buffer.from(created))).toBe(true);
    for (const next of ACTIVITY_STATES) {
      const saved = sessnap(id, next, `saved-${next}`);
      await client.save({ sessionId: id, snapshot: snap(saved), activityState: next });
      const got = await client.load({ sessionId: id });
      expect(got.snapshot!.format).toBe(FORMAT);
      expect(Buffer.from(got.snapshot!.payload).equals(Buffer.from(saved)), `after Save with ${JSON.stringify(next)}`).toBe(true);
    }
    const last = (await client.load({ sessionId: id })).snapshot!.payload;
    await expectCode(client.create({ sessionId: id, snapshot: snap(sessnap(id, activityState, "loser")), activityState }), Code.AlreadyExists, id);
    expect(Buffer.from((await client.load({ sessionId: id })).snapshot!.payload).equals(Buffer.from(last))).toBe(true);
  });

  test("with activity_projection, PageMetadata echoes the activity_state of the last successful Save or Create (2.6, 8.8)", async (ctx) => {
    // The service does not page metadata yet: this runs once branch metadata (session-metadata.md) advertises the capability.
    if (!(await client.capabilities({})).activityProjection) ctx.skip("activity_projection is not advertised (session metadata paging: branch metadata)");
    const rows = async () => {
      const out = new Map<string, string>();
      let cursor: Awaited<ReturnType<typeof client.pageMetadata>>["nextCursor"];
      do {
        const page = await client.pageMetadata({ limit: 256, cursor });
        for (const r of page.sessions) out.set(r.sessionId, r.activityState);
        cursor = page.nextCursor;
      } while (cursor !== undefined);
      return out;
    };
    await client.create({ sessionId: "projected", snapshot: snap(sessnap("projected", "draft")), activityState: "draft" });
    expect((await rows()).get("projected")).toBe("draft");
    await expectCode(client.create({ sessionId: "projected", snapshot: snap(sessnap("projected", "active")), activityState: "active" }), Code.AlreadyExists);
    expect((await rows()).get("projected")).toBe("draft");
    await client.save({ sessionId: "projected", snapshot: snap(sessnap("projected", "active")), activityState: "active" });
    expect((await rows()).get("projected")).toBe("active");
  });

  const badSaves: Array<[string, Record<string, unknown>, string]> = [
    ["blank session_id", { sessionId: "", snapshot: snap("x") }, "session_id"],
    ["whitespace session_id", { sessionId: "   ", snapshot: snap("x") }, "session_id"],
    ["missing snapshot", { sessionId: "bad-1" }, "snapshot"],
    ["unknown format", { sessionId: "bad-2", snapshot: { format: "sessnap-json/99", payload: new Uint8Array([1]) } }, "snapshot.format"],
    ["empty format", { sessionId: "bad-3", snapshot: { format: "", payload: new Uint8Array([1]) } }, "snapshot.format"],
    ["empty payload", { sessionId: "bad-4", snapshot: { format: FORMAT, payload: new Uint8Array() } }, "snapshot.payload"],
    ["unknown activity_state", { sessionId: "bad-5", snapshot: snap("x"), activityState: "sleeping" }, "activity_state"],
  ];
  test.each(badSaves)("Save and Create reject %s with INVALID_ARGUMENT naming the field, storing nothing (2.5, 8.7)", async (_label, req, field) => {
    await expectCode(client.save(req as never), Code.InvalidArgument, field);
    await expectCode(client.create(req as never), Code.InvalidArgument, field);
    const id = (req as { sessionId: string }).sessionId;
    if (id.trim() !== "") await expectCode(client.load({ sessionId: id }), Code.NotFound);
  });

  test("Load and Delete reject a blank session_id with INVALID_ARGUMENT (2.5)", async () => {
    await expectCode(client.load({ sessionId: "" }), Code.InvalidArgument, "session_id");
    await expectCode(client.delete({ sessionId: " " }), Code.InvalidArgument, "session_id");
  });

  test("an id longer than 16 KiB is rejected with INVALID_ARGUMENT", async () => {
    await expectCode(client.save({ sessionId: "y".repeat(16 * 1024 + 1), snapshot: snap("x") }), Code.InvalidArgument, "session_id");
  });
});
