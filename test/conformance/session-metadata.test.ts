/**
 * Session metadata paging, lineage and activity projection over the wire, on
 * every backend (issue 12): the harness's acceptance cases of
 * spec/session-metadata.md section 6, the field projection of sections 1-2,
 * and the cursor rules of section 4.
 */
import { beforeAll, describe, expect, test } from "vitest";
import { Code, type Client } from "@connectrpc/connect";
import { SessionStoreService, type SessionMetadataCursor } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { PageSessionMetadataRequestSchema } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { principalScopeHash } from "../../common/principal-scope.js";
import { nanosToTimestamp } from "../../services/rpc/timestamp.js";
import { conformanceBackends, type TestBackend } from "../helpers/backends.js";
import { serveService } from "../helpers/driver-server.js";
import { grpcClient } from "../helpers/clients.js";
import { expectCode } from "../helpers/errors.js";
import { clockPast } from "../helpers/wait.js";
import { incarnationOf, newIncarnation, sessnap, type TestPrincipal, type TestSession } from "../helpers/sessnap.js";

const FORMAT = "sessnap-json/1";
type PageRequest = MessageInitShape<typeof PageSessionMetadataRequestSchema>;

const nanos = (t: { seconds: bigint; nanos: number } | undefined) => (t === undefined ? undefined : t.seconds * 1_000_000_000n + BigInt(t.nanos));
const hex = (b: Uint8Array) => Buffer.from(b).toString("hex");
const scopeOf = (p: TestPrincipal | undefined) => hex(principalScopeHash(p === undefined ? undefined : { issuer: p.Issuer, subject: p.Subject }));

describe.each(conformanceBackends())("session metadata on $name", (backend: TestBackend) => {
  const served = serveService(backend, "session-store", SessionStoreService);
  let client: Client<typeof SessionStoreService>;
  beforeAll(() => {
    client = served.client;
  });

  const save = (s: TestSession, activityState = "") => client.save({ sessionId: s.id, snapshot: { format: FORMAT, payload: sessnap(s) }, activityState });
  const create = (s: TestSession, activityState = "") => client.create({ sessionId: s.id, snapshot: { format: FORMAT, payload: sessnap(s) }, activityState });
  const page = (req: PageRequest) => client.pageMetadata(req);
  const ownedBy = (p: TestPrincipal, rest: PageRequest = {}): PageRequest => ({ limit: 10, ...rest, ownershipEnforced: true, ownerIssuer: p.Issuer, ownerSubject: p.Subject });

  // Runs first, on the empty store: the draft-activity scenario of section 6.3 (1).
  test("failed and colliding writes leave the page and activity unchanged; Save moves draft to active (6.3 StoresProjectActivityAtomically)", async () => {
    await expectCode(client.create({ sessionId: "session" }), Code.InvalidArgument, "snapshot");
    let p = await page({ limit: 1 });
    expect([p.sessions.length, p.totalCount, p.nextCursor]).toEqual([0, 0, undefined]);

    const draft: TestSession = { id: "session", env: { Kind: "local", ID: "/workspace", Revision: "r1" } };
    await create(draft, "draft");
    p = await page({ limit: 1 });
    expect(p.sessions.map((s) => [s.sessionId, s.activityState])).toEqual([["session", "draft"]]);
    const total = (await page({ limit: 1 })).totalCount;

    const active: TestSession = { ...draft, messages: [{ role: "user", text: "prompt" }] };
    await expectCode(create(active, "active"), Code.AlreadyExists);
    await expectCode(client.save({ sessionId: "session", activityState: "active" }), Code.InvalidArgument, "snapshot");
    p = await page({ limit: 1 });
    expect(p.sessions.map((s) => s.activityState)).toEqual(["draft"]);
    expect(p.totalCount).toBe(total);

    await save(active, "active");
    p = await page({ limit: 1 });
    expect(p.sessions.map((s) => [s.sessionId, s.activityState])).toEqual([["session", "active"]]);

    const owner = { Issuer: "issuer", Subject: "owner" };
    await create({ id: "owned", owner });
    await create({ id: "foreign", owner: { Issuer: "issuer", Subject: "other" } });
    p = await page(ownedBy(owner, { limit: 1 }));
    expect(p.sessions).toHaveLength(1);
    expect(p.totalCount).toBe(1);
    expect([p.sessions[0]!.sessionId, p.sessions[0]!.ownerSubject, p.sessions[0]!.hasOwner]).toEqual(["owned", "owner", true]);
  });

  test("a colliding Create does not bump the paging generation (6.4, 8.5)", async () => {
    const owner = { Issuer: "collide", Subject: "c" };
    await create({ id: "collide-1", owner });
    await create({ id: "collide-2", owner });
    const first = await page(ownedBy(owner, { limit: 1 }));
    await expectCode(create({ id: "collide-1", owner }), Code.AlreadyExists);
    const second = await page(ownedBy(owner, { limit: 1, cursor: first.nextCursor }));
    expect(second.sessions.map((s) => s.sessionId)).toEqual(["collide-1"]);
  });

  test("RunMetadataPager: owner-filtered keyset pages, totals, and restarts (6.1, 8.4)", async () => {
    const alice = { Issuer: "https://issuer.example", Subject: "alice" };
    const bob = { Issuer: "https://issuer.example", Subject: "bob" };
    const fixture = (id: string, owner?: TestPrincipal): TestSession => ({ id, owner, kind: "main", createdAt: "2026-06-01T12:30:45.123456789Z" });
    await save(fixture("b", alice));
    // "a" is saved once the clock has passed b's save time, so its modified_at is strictly later.
    await clockPast(nanos((await page(ownedBy(alice))).sessions.find((s) => s.sessionId === "b")!.modifiedAt)!);
    for (const [id, owner] of [["a", alice], ["foreign", bob], ["ownerless", undefined]] as const) await save(fixture(id, owner));

    const p1 = await page(ownedBy(alice, { limit: 1 }));
    expect(p1.sessions).toHaveLength(1);
    expect(p1.totalCount).toBe(2);
    expect(p1.nextCursor).toBeDefined();
    const c = p1.nextCursor!;
    expect([c.generation !== "", c.scope !== "", c.continuation !== ""]).toEqual([true, true, true]);
    expect([c.sessionId, nanos(c.modifiedAt)]).toEqual([p1.sessions[0]!.sessionId, nanos(p1.sessions[0]!.modifiedAt)]);

    const p2 = await page(ownedBy(alice, { limit: 1, cursor: c }));
    expect(p2.sessions).toHaveLength(1);
    expect(p2.totalCount).toBe(2);
    expect(p2.nextCursor).toBeUndefined();
    expect(p2.sessions[0]!.sessionId).not.toBe(p1.sessions[0]!.sessionId);
    // "a" was saved after "b": newest first.
    const [r1, r2] = [p1.sessions[0]!, p2.sessions[0]!];
    expect([r1.sessionId, r2.sessionId]).toEqual(["a", "b"]);
    expect(nanos(r1.modifiedAt)! > nanos(r2.modifiedAt)!).toBe(true);

    for (const row of [r1, r2]) {
      expect(["a", "b"]).toContain(row.sessionId);
      expect(row.estimatedBytes > 0n).toBe(true);
      expect(row.kind).toBe("main");
      expect(row.environmentRef).toMatchObject({ kind: "local", id: "/workspace", revision: "in-tree-v1" });
      expect(nanos(row.createdAt)).toBe(1_780_317_045_123_456_789n);
    }

    await expectCode(page(ownedBy(bob, { limit: 1, cursor: c })), Code.Aborted);
    await expectCode(page(ownedBy(alice, { limit: 1, cursor: { ...c, continuation: "foreign-pager-continuation" } })), Code.Aborted);
    await save(fixture("generation-change", alice));
    await expectCode(page(ownedBy(alice, { limit: 1, cursor: c })), Code.Aborted);
  });

  test("the cursor key is a keyset boundary at nanosecond precision, ties broken by id byte-wise (4.2)", async () => {
    const owner = { Issuer: "keyset", Subject: "k" };
    for (const id of ["k-1", "k-2", "k-3"]) await save({ id, owner });
    const all = await page(ownedBy(owner));
    expect(all.sessions.map((s) => s.sessionId)).toEqual(["k-3", "k-2", "k-1"]);
    const first = await page(ownedBy(owner, { limit: 1 }));
    const at = (id: string) => all.sessions.find((s) => s.sessionId === id)!.modifiedAt!;
    const cursorAt = (ns: bigint, sessionId: string) => ({ ...first.nextCursor!, modifiedAt: nanosToTimestamp(ns), sessionId });
    const ids = async (c: SessionMetadataCursor) => (await page(ownedBy(owner, { cursor: c }))).sessions.map((s) => s.sessionId);

    const t2 = nanos(at("k-2"))!;
    // Same time: an id sorting before "k-2" keeps it, "k-2" itself does not.
    expect(await ids(cursorAt(t2, "k-1"))).toEqual(["k-2", "k-1"]);
    expect(await ids(cursorAt(t2, "k-2"))).toEqual(["k-1"]);
    // One nanosecond later than k-2's time: k-2 is strictly older, whatever the id; one nanosecond earlier: it is newer.
    expect(await ids(cursorAt(t2 + 1n, "zzz"))).toEqual(["k-2", "k-1"]);
    expect(await ids(cursorAt(t2 - 1n, "a"))).toEqual(["k-1"]);
  });

  test("ids order byte-wise on UTF-8, not on UTF-16 (4.2)", async () => {
    const owner = { Issuer: "bytes", Subject: "b" };
    // U+FF5E sorts before U+1F600 as UTF-8 bytes, after it as UTF-16 code units.
    const ids = ["\u{1F600}", "\uFF5E", "z"];
    for (const id of ids) await save({ id, owner });
    const whole = await page(ownedBy(owner));
    expect(whole.sessions.map((s) => s.sessionId)).toEqual(["z", "\uFF5E", "\u{1F600}"]);
    // A cursor at the emoji row's save time with id U+FF5E: byte-wise the emoji sorts after U+FF5E, so that row follows the cursor.
    const p1 = await page(ownedBy(owner, { limit: 1 }));
    const tie = { ...p1.nextCursor!, sessionId: "\uFF5E", modifiedAt: nanosToTimestamp(nanos(whole.sessions[2]!.modifiedAt)!) };
    expect((await page(ownedBy(owner, { cursor: tie }))).sessions.map((s) => s.sessionId)).toEqual(["\u{1F600}"]);
  });

  test("every field of a sessnap payload is projected (1.2, 1.10, 2.1)", async () => {
    const owner = { Issuer: "https://issuer.example", Subject: "carol", GrantType: "user", Name: "Carol" };
    const parentInc = newIncarnation();
    const payload = sessnap({
      id: "child-1",
      turns: 2,
      createdAt: "2026-06-01T14:30:45.5+02:00",
      messages: [{ role: "user", text: "summarise the repo" }, { role: "assistant", text: "done" }],
      kind: "parallel_branch",
      relationship: { parent_session_id: "root-1", parent_incarnation: parentInc, call_id: "call-7", branch_index: 0 },
      modelId: "anthropic/claude-3.5-sonnet",
      title: "summarise the repo",
      titleProvenance: "generated",
      owner,
      env: { Kind: "local", ID: "/workspace", Revision: "r1" },
    });
    await client.save({ sessionId: "child-1", snapshot: { format: FORMAT, payload } });
    const [row] = (await page(ownedBy(owner))).sessions;
    expect(row).toMatchObject({
      sessionId: "child-1",
      state: "idle",
      turns: 2,
      modelId: "anthropic/claude-3.5-sonnet",
      title: "summarise the repo",
      titleProvenance: "generated",
      kind: "parallel_branch",
      parentSessionId: "root-1",
      parentIncarnation: parentInc,
      callId: "call-7",
      branchIndex: 0,
      scheduleName: "",
      hasOwner: true,
      ownerIssuer: owner.Issuer,
      ownerSubject: "carol",
      ownerGrantType: "user",
      ownerName: "Carol",
      environmentRef: { kind: "local", id: "/workspace", revision: "r1" },
      estimatedBytes: BigInt(payload.byteLength),
      activityState: "active",
    });
    expect(nanos(row!.createdAt)).toBe(1_780_317_045_500_000_000n);
  });

  test("a payload that is not a sessnap object is stored and listed with only id, save time and size (issue 12)", async () => {
    await client.save({ sessionId: "opaque-1", snapshot: { format: FORMAT, payload: Buffer.from("not json at all") } });
    await client.save({ sessionId: "opaque-2", snapshot: { format: FORMAT, payload: Buffer.from('{"no":"id"}') } });
    const rows = (await page({ limit: 1000 })).sessions.filter((s) => s.sessionId.startsWith("opaque-"));
    expect(rows.map((r) => r.sessionId).sort()).toEqual(["opaque-1", "opaque-2"]);
    for (const r of rows) {
      expect(r.modifiedAt).toBeDefined();
      expect(r.estimatedBytes).toBe(BigInt(r.sessionId === "opaque-1" ? 15 : 11));
      expect([r.state, r.kind, r.hasOwner, r.environmentRef, r.createdAt, r.turns]).toEqual(["", "", false, undefined, undefined, 0]);
    }
    expect(Buffer.from((await client.load({ sessionId: "opaque-1" })).snapshot!.payload).toString()).toBe("not json at all");
  });

  test("a payload whose id differs from session_id is refused naming both, and nothing is stored (2.3)", async () => {
    const err = await expectCode(client.save({ sessionId: "mine", snapshot: { format: FORMAT, payload: sessnap({ id: "theirs" }) } }), Code.InvalidArgument, "snapshot.payload");
    expect(err.rawMessage).toContain('"mine"');
    expect(err.rawMessage).toContain('"theirs"');
    await expectCode(client.create({ sessionId: "mine", snapshot: { format: FORMAT, payload: sessnap({ id: "theirs" }) } }), Code.InvalidArgument, "theirs");
    await expectCode(client.load({ sessionId: "mine" }), Code.NotFound);
  });

  test("activity: the sent value is stored; with none it is derived from messages (1.9, 2.6)", async () => {
    const owner = { Issuer: "activity", Subject: "a" };
    const cases: Array<[string, TestSession["messages"], string, string]> = [
      ["act-sent-draft", [{ role: "user", text: "real prompt" }], "draft", "draft"],
      ["act-none", undefined, "", "draft"],
      ["act-prompt", [{ role: "assistant", text: "hi" }, { role: "user", text: "do it" }], "", "active"],
      ["act-media-only", [{ role: "user" }], "", "active"],
      ["act-compacted", [{ role: "user", text: "[conversation compacted] earlier" }, { role: "user", text: "[earlier turns summarised] x" }], "", "draft"],
      [
        "act-nudges",
        [
          {
            role: "user",
            text: "Please continue. Make concrete progress on the task using your tools, or \u2014 if you are blocked or believe the task is complete \u2014 say so explicitly in a short message.",
          },
          { role: "user", text: "[harness note: 2 background command(s) finished: a, b]" },
        ],
        "",
        "draft",
      ],
      ["act-note-unclosed", [{ role: "user", text: "[harness note: 2 background command(s) finished: a, b" }], "", "active"],
    ];
    for (const [id, messages, sent] of cases) await save({ id, owner, messages }, sent);
    const rows = new Map((await page(ownedBy(owner, { limit: 100 }))).sessions.map((s) => [s.sessionId, s.activityState]));
    for (const [id, , , want] of cases) expect(rows.get(id), id).toBe(want);
  });

  test("activity never affects page order (6.3 paging invariant)", async () => {
    const owner = { Issuer: "activity-order", Subject: "o" };
    await save({ id: "old", owner, messages: [{ role: "user", text: "go" }] }, "active");
    await save({ id: "new", owner }, "draft");
    const p1 = await page(ownedBy(owner, { limit: 1 }));
    expect([p1.sessions.map((s) => [s.sessionId, s.activityState]), p1.totalCount, p1.nextCursor !== undefined]).toEqual([[["new", "draft"]], 2, true]);
    const p2 = await page(ownedBy(owner, { limit: 1, cursor: p1.nextCursor }));
    expect([p2.sessions.map((s) => [s.sessionId, s.activityState]), p2.totalCount, p2.nextCursor]).toEqual([[["old", "active"]], 2, undefined]);
  });

  test("enforced ownership without an owner matches nothing (3.3)", async () => {
    const p = await page({ limit: 10, ownershipEnforced: true });
    expect([p.sessions.length, p.totalCount, p.nextCursor]).toEqual([0, 0, undefined]);
  });

  test("lineageconformance.Run and the fresh-client re-read (6.2, 8.6, 8.1)", async () => {
    const alice = { Issuer: "issuér/原文", Subject: "alice", GrantType: "user", Name: "Alice" };
    const bob = { Issuer: "issuer", Subject: "bob", GrantType: "user", Name: "Bob" };
    const base = { createdAt: "1970-01-01T00:00:01Z", env: { Kind: "local", ID: "/workspace", Revision: "in-tree-v1" } };
    const rootInc = newIncarnation();
    const root: TestSession = { ...base, id: "root", kind: "main", owner: alice, incarnation: rootInc };
    const childInc = newIncarnation();
    const child: TestSession = { ...base, id: "z-child", kind: "subagent", relationship: { parent_session_id: "root", parent_incarnation: rootInc, call_id: "call" }, owner: alice, incarnation: childInc };
    const scheduled: TestSession = { ...base, id: "a-scheduled", kind: "scheduled", relationship: { schedule_name: "nightly", origin_session_id: "root", origin_incarnation: rootInc }, owner: bob };
    await create(root);
    await create(child);
    await create(scheduled);
    await create({ ...base, id: "subagent-root-fake", kind: "main", owner: bob });
    const read = (limit: number, rootId = "root", inc = rootInc) => client.readLineage({ rootSessionId: rootId, rootIncarnation: inc, limit });

    let r = await read(2);
    expect(r.truncated).toBe(true);
    expect(r.records.map((x) => x.sessionId)).toEqual(["root", "a-scheduled"]);
    r = await read(10);
    expect(r.truncated).toBe(false);
    expect(r.records.map((x) => x.sessionId)).toEqual(["root", "a-scheduled", "z-child"]);
    expect(hex(r.records[0]!.ownerScope)).toBe(scopeOf(alice));
    expect(hex(r.records[1]!.ownerScope)).toBe(scopeOf(bob));
    expect(r.records.map((x) => [x.incarnation !== "", x.state, x.deletedAt])).toEqual([
      [true, "retained", undefined],
      [true, "retained", undefined],
      [true, "retained", undefined],
    ]);
    expect(r.records[0]!.incarnation).toBe(rootInc);
    expect(r.records[1]).toMatchObject({ kind: "scheduled", scheduleName: "nightly", originSessionId: "root", originIncarnation: rootInc });
    expect(r.records[2]).toMatchObject({ kind: "subagent", parentSessionId: "root", parentIncarnation: rootInc, callId: "call", incarnation: childInc });
    expect(r.records[2]!.branchIndex).toBeUndefined();

    let exact = await client.readLineage({ rootSessionId: "root", rootIncarnation: rootInc, limit: 1, recordSessionId: "z-child", recordIncarnation: childInc });
    expect([exact.truncated, exact.records.map((x) => [x.sessionId, x.incarnation])]).toEqual([false, [["z-child", childInc]]]);
    const schedInc = r.records[1]!.incarnation;
    exact = await client.readLineage({ rootSessionId: "a-scheduled", rootIncarnation: schedInc, limit: 1, recordSessionId: "z-child", recordIncarnation: childInc });
    expect([exact.truncated, exact.records]).toEqual([false, []]);

    await expectCode(create({ ...root, owner: bob, incarnation: newIncarnation() }), Code.AlreadyExists);
    expect((await read(10)).records.map((x) => [x.sessionId, x.incarnation])).toEqual([
      ["root", rootInc],
      ["a-scheduled", schedInc],
      ["z-child", childInc],
    ]);

    await client.delete({ sessionId: "z-child" });
    r = await read(10);
    expect(r.records[2]).toMatchObject({ sessionId: "z-child", state: "pruned", incarnation: childInc });
    expect(r.records[2]!.deletedAt).toBeDefined();
    expect(hex(r.records[2]!.ownerScope)).toBe(scopeOf(alice));

    const childInc2 = newIncarnation();
    await create({ ...child, owner: bob, incarnation: childInc2 });
    r = await read(10);
    expect(r.records.map((x) => [x.sessionId, x.state, x.incarnation])).toEqual([
      ["root", "retained", rootInc],
      ["a-scheduled", "retained", schedInc],
      ["z-child", "retained", childInc2],
      ["z-child", "pruned", childInc],
    ]);
    expect(hex(r.records[2]!.ownerScope)).toBe(scopeOf(bob));
    expect(r.records[3]!.deletedAt).toBeDefined();

    await expectCode(client.readLineage({ rootSessionId: "root", rootIncarnation: rootInc, limit: 257 }), Code.InvalidArgument, "limit");
    await expectCode(client.readLineage({ rootSessionId: "root", rootIncarnation: rootInc, limit: 1, recordSessionId: "child" }), Code.InvalidArgument, "record_incarnation");

    const results = await Promise.all(Array.from({ length: 16 }, () => save(root).then(() => read(10))));
    for (const x of results) expect(x.records[0]!.sessionId).toBe("root");
    r = await read(10);
    expect([r.records[0]!.sessionId, r.records[0]!.state, r.records[0]!.incarnation]).toEqual(["root", "retained", rootInc]);

    await client.delete({ sessionId: "root" });
    const rootInc2 = newIncarnation();
    await create({ ...root, incarnation: rootInc2 });
    r = await read(10, "root", rootInc2);
    expect(r.records.map((x) => [x.sessionId, x.state, x.incarnation])).toEqual([
      ["root", "retained", rootInc2],
      ["root", "pruned", rootInc],
    ]);
    r = await read(10);
    expect(r.records.length).toBeGreaterThanOrEqual(4);
    expect(r.records.map((x) => [x.sessionId, x.state])).toEqual([
      ["root", "retained"],
      ["root", "pruned"],
      ["a-scheduled", "retained"],
      ["z-child", "retained"],
      ["z-child", "pruned"],
    ]);

    const fresh = grpcClient(SessionStoreService, served.server.address);
    const loaded = await fresh.load({ sessionId: "root" });
    const again = await fresh.readLineage({ rootSessionId: "root", rootIncarnation: incarnationOf(loaded.snapshot!.payload), limit: 10 });
    expect(again.records).toHaveLength(2);
    expect(again.records[0]!.sessionId).toBe("root");
  });

  test("Save of a new incarnation prunes the old one; a snapshot without incarnation gets the legacy id (1.5, 5.2)", async () => {
    const inc1 = newIncarnation();
    await save({ id: "reinc", incarnation: inc1 });
    const inc2 = newIncarnation();
    await save({ id: "reinc", incarnation: inc2 });
    const r = await client.readLineage({ rootSessionId: "reinc", rootIncarnation: inc2, limit: 10 });
    expect(r.records.map((x) => [x.incarnation, x.state, x.deletedAt !== undefined])).toEqual([
      [inc2, "retained", false],
      [inc1, "pruned", true],
    ]);
    expect(r.records.map((x) => x.kind)).toEqual(["unknown", "unknown"]);

    await save({ id: "s1", incarnation: "", createdAt: "1970-01-01T00:00:01Z" });
    const legacy = "legacy_99a5b3dfa805c1922f429916ef3b62ec6d2cca00a49c23c8b0f714eadc70365a";
    const l = await client.readLineage({ rootSessionId: "s1", rootIncarnation: legacy, limit: 1 });
    expect(l.records.map((x) => [x.sessionId, x.incarnation, hex(x.ownerScope)])).toEqual([["s1", legacy, scopeOf(undefined)]]);
  });

  test("Capabilities advertise metadata_paging, lineage and activity_projection (2.4, issue 12)", async () => {
    const caps = await client.capabilities({});
    expect(caps).toMatchObject({ contract: "session-store/1", list: true, delete: true, create: true, metadataPaging: true, lineage: true, activityProjection: true });
  });

  const badPages: Array<[string, PageRequest, string]> = [
    ["limit 0", { limit: 0 }, "limit"],
    ["limit -1", { limit: -1 }, "limit"],
    ["a cursor without modified_at", { limit: 1, cursor: { sessionId: "a", generation: "g", scope: "all", continuation: "c" } }, "cursor.modified_at"],
    ["a cursor with invalid nanos", { limit: 1, cursor: { modifiedAt: { seconds: 1n, nanos: 1_000_000_000 }, sessionId: "a", generation: "g", scope: "all", continuation: "c" } }, "cursor.modified_at"],
    ["a cursor past year 9999", { limit: 1, cursor: { modifiedAt: { seconds: 253_402_300_800n }, sessionId: "a", generation: "g", scope: "all", continuation: "c" } }, "cursor.modified_at"],
    ["a cursor without session_id", { limit: 1, cursor: { modifiedAt: { seconds: 1n }, generation: "g", scope: "all", continuation: "c" } }, "cursor.session_id"],
    ["a cursor without generation", { limit: 1, cursor: { modifiedAt: { seconds: 1n }, sessionId: "a", scope: "all", continuation: "c" } }, "cursor.generation"],
    ["a cursor without scope", { limit: 1, cursor: { modifiedAt: { seconds: 1n }, sessionId: "a", generation: "g", continuation: "c" } }, "cursor.scope"],
    ["a cursor without continuation", { limit: 1, cursor: { modifiedAt: { seconds: 1n }, sessionId: "a", generation: "g", scope: "all" } }, "cursor.continuation"],
  ];
  test.each(badPages)("PageMetadata refuses %s with INVALID_ARGUMENT naming the field (4.1)", async (_label, req, field) => {
    await expectCode(page(req), Code.InvalidArgument, field);
  });

  test("PageMetadata answers ABORTED for a stale, foreign or cross-scope cursor (4.2, 2.5)", async () => {
    const owner = { Issuer: "aborts", Subject: "x" };
    await save({ id: "ab-1", owner });
    await save({ id: "ab-2", owner });
    const c = (await page(ownedBy(owner, { limit: 1 }))).nextCursor!;
    const variants: Array<[string, PageRequest]> = [
      ["unenforced (scope all)", { limit: 1, cursor: c }],
      ["no owner (scope owner:none)", { limit: 1, ownershipEnforced: true, cursor: c }],
      ["another store's generation", ownedBy(owner, { limit: 1, cursor: { ...c, generation: "0123456789abcdef.1" } })],
      ["a generation from the future", ownedBy(owner, { limit: 1, cursor: { ...c, generation: `${c.generation}9` } })],
      ["another scope string", ownedBy(owner, { limit: 1, cursor: { ...c, scope: "all" } })],
      ["a foreign continuation", ownedBy(owner, { limit: 1, cursor: { ...c, continuation: "mecatl-scan-keyset-v1" } })],
    ];
    for (const [label, req] of variants) await expectCode(page(req), Code.Aborted).catch((e: Error) => Promise.reject(new Error(`${label}: ${e.message}`)));
    expect((await page(ownedBy(owner, { limit: 1, cursor: c }))).sessions).toHaveLength(1);
  });

  const badLineage: Array<[string, Record<string, unknown>, string]> = [
    ["an empty root_session_id", { rootSessionId: "", rootIncarnation: "inc_aaaqeayeaudaocajbifqydiob4", limit: 1 }, "root_session_id"],
    ["an empty root_incarnation", { rootSessionId: "r", rootIncarnation: "", limit: 1 }, "root_incarnation"],
    ["a root_incarnation of the wrong shape", { rootSessionId: "r", rootIncarnation: "inc_aaaqeayeaudaocajbifqydiob5", limit: 1 }, "root_incarnation"],
    ["limit 0", { rootSessionId: "r", rootIncarnation: "inc_aaaqeayeaudaocajbifqydiob4", limit: 0 }, "limit"],
    ["limit 257", { rootSessionId: "r", rootIncarnation: "inc_aaaqeayeaudaocajbifqydiob4", limit: 257 }, "limit"],
    ["a selector with only record_session_id", { rootSessionId: "r", rootIncarnation: "inc_aaaqeayeaudaocajbifqydiob4", limit: 1, recordSessionId: "c" }, "record_incarnation"],
    ["a selector with only record_incarnation", { rootSessionId: "r", rootIncarnation: "inc_aaaqeayeaudaocajbifqydiob4", limit: 1, recordIncarnation: "inc_aaaqeayeaudaocajbifqydiob4" }, "record_session_id"],
    ["a selector naming the root", { rootSessionId: "r", rootIncarnation: "inc_aaaqeayeaudaocajbifqydiob4", limit: 1, recordSessionId: "r", recordIncarnation: "inc_aaaqeayeaudaocajbifqydiob4" }, "record_session_id"],
    ["a selector with an invalid incarnation", { rootSessionId: "r", rootIncarnation: "inc_aaaqeayeaudaocajbifqydiob4", limit: 1, recordSessionId: "c", recordIncarnation: "legacy_00" }, "record_incarnation"],
  ];
  test.each(badLineage)("ReadLineage refuses %s with INVALID_ARGUMENT naming the field (5.3)", async (_label, req, field) => {
    await expectCode(client.readLineage(req), Code.InvalidArgument, field);
  });

  const badPayloads: Array<[string, Record<string, unknown>, string]> = [
    ["an invalid incarnation", { incarnation: "inc_nope" }, "incarnation"],
    ["an invalid related incarnation", { kind: "subagent", relationship: { parent_session_id: "p", parent_incarnation: "legacy_xyz", call_id: "c" } }, "relationship.parent_incarnation"],
    ["a state that is not a string", { state: 3 }, "state"],
    ["a fractional turn count", { counters: { Turns: 1.5 } }, "counters.Turns"],
    ["a turn count beyond int32", { counters: { Turns: 2 ** 31 } }, "counters.Turns"],
    ["a created_at that is not RFC 3339", { created_at: "yesterday" }, "created_at"],
    ["an owner whose subject holds NUL", { owner: { Issuer: "i", Subject: "a\u0000b" } }, "owner"],
    ["an owner that is not an object", { owner: "alice" }, "owner"],
    ["messages that are not an array", { messages: {} }, "messages"],
  ];
  test.each(badPayloads)("Save and Create refuse a sessnap payload with %s, naming the field and storing nothing", async (_label, patch, field) => {
    const id = `bad-payload-${field}`;
    const payload = Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(sessnap({ id })).toString()), ...patch }));
    await expectCode(client.save({ sessionId: id, snapshot: { format: FORMAT, payload } }), Code.InvalidArgument, field);
    await expectCode(client.create({ sessionId: id, snapshot: { format: FORMAT, payload } }), Code.InvalidArgument, field);
    await expectCode(client.load({ sessionId: id }), Code.NotFound);
  });

  test("keys match case-insensitively and the last duplicate wins, as Go decodes them (1.1)", async () => {
    const text = `{"ID":"case-1","state":"idle","STATE":"running","Kind":"main","owner":{"issuer":"ci","SUBJECT":"s"},"created_at":"1970-01-01T00:00:01Z","environment_ref":{"kind":"mem","id":"x","revision":"y"}}`;
    await client.save({ sessionId: "case-1", snapshot: { format: FORMAT, payload: Buffer.from(text) } });
    const [row] = (await page(ownedBy({ Issuer: "ci", Subject: "s" }))).sessions;
    expect(row).toMatchObject({ sessionId: "case-1", state: "running", kind: "main", hasOwner: true, environmentRef: { kind: "mem", id: "x", revision: "y" } });
  });

  test("a page longer than the limit ends with a cursor bound to its last row, and pages never repeat a row (2.5)", async () => {
    const owner = { Issuer: "many", Subject: "m" };
    for (let i = 0; i < 7; i++) await save({ id: `many-${i}`, owner });
    const seen: string[] = [];
    let cursor: SessionMetadataCursor | undefined;
    do {
      const p: Awaited<ReturnType<typeof page>> = await page(ownedBy(owner, { limit: 3, cursor }));
      expect(p.totalCount).toBe(7);
      seen.push(...p.sessions.map((s) => s.sessionId));
      cursor = p.nextCursor;
      if (cursor !== undefined) expect(cursor.sessionId).toBe(p.sessions.at(-1)!.sessionId);
    } while (cursor !== undefined);
    expect(seen).toEqual(Array.from({ length: 7 }, (_, i) => `many-${6 - i}`));
  });
});
