import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Code } from "@connectrpc/connect";
import { startRedisBehindProxy, withLostReply, type RedisBehindProxy } from "../helpers/redis-behind-proxy.js";
import { expectCode } from "../helpers/errors.js";
import { newIncarnation, sessnap } from "../helpers/sessnap.js";
import { INLINE_PAYLOAD_BYTES, REDIS_CHUNK_BYTES } from "../../services/session-store/redis-payload.js";
import { decodeEnvelope, ev, readAfterAll } from "../helpers/event-log.js";
import { fireRecord, iso, PENDING, readFire, readSchedule, scheduleRecord, T0, ts, ZERO, type SpecInit, type State } from "../helpers/schedules.js";

/**
 * Every write RPC with its reply lost at the Redis hop (issue 9, "what was
 * seen" 1): the proxy forwards the script call, swallows Redis's reply and
 * cuts both sockets, so Redis has applied the write and the server never
 * hears it. The caller's answer must match what is stored, and nothing may
 * be applied twice. Before operation records, ioredis re-sent the command on
 * reconnect and the schedule store's compare-and-set loop re-judged its own
 * commit: Append stored its record twice, Create answered ALREADY_EXISTS,
 * ClaimSchedule answered NOT_FOUND, ReArmOneShot counted 2.
 */
describe("every write RPC with its Redis reply lost", () => {
  let env: RedisBehindProxy;
  const enc = new TextEncoder();
  const snap = (text: string) => ({ format: "sessnap-json/1", payload: enc.encode(JSON.stringify({ text })) });

  beforeAll(async () => {
    env = await startRedisBehindProxy(["--store-timeout", "3s"]);
    // Every script is run once first, so Redis has it cached and the lost command is the write itself, not a NOSCRIPT answer.
    const c = env.clients;
    await c.sessions.save({ sessionId: "warm", snapshot: snap("warm") });
    await c.sessions.delete({ sessionId: "warm" });
    await c.events.append({ sessionId: "warm", event: ev({}) });
    await c.leases.acquire({ sessionId: "warm", owner: "warm" });
    await c.schedules.saveSchedule({ name: "warm", schedule: scheduleRecord({ Name: "warm" }) });
  });
  afterAll(async () => {
    await env?.stop();
  });

  /** Runs `call` with the reply of the first script call that names `id` (and every other marker) lost. */
  const lost = <T>(markers: string[], call: () => Promise<T>) => withLostReply(env.proxy, markers, call);
  /** A schedule mutation's commit (not its snapshot read) names the schedule and carries HINCRBY ops. */
  const commitOf = (name: string) => [`}:${name}:`, "HINCRBY"];
  const save = (spec: SpecInit, st: Partial<State> = {}) => env.clients.schedules.saveSchedule({ name: spec.Name, schedule: scheduleRecord(spec, st) });
  const load = async (name: string) => readSchedule((await env.clients.schedules.loadSchedule({ name })).schedule);

  describe("session store", () => {
    test("Save answers OK and Load returns the new snapshot", async () => {
      const { sessions } = env.clients;
      await sessions.save({ sessionId: "lr-save", snapshot: snap("v1") });
      await lost(["}:lr-save:"], () => sessions.save({ sessionId: "lr-save", snapshot: snap("v2") }));
      expect((await sessions.load({ sessionId: "lr-save" })).snapshot).toMatchObject(snap("v2"));
    });

    test("a staged Save (over 1 MiB) whose publishing script's reply is lost answers OK, stores the new payload once, and leaves no staging list", async () => {
      const { sessions } = env.clients;
      await sessions.save({ sessionId: "lr-staged", snapshot: snap("v1") });
      const big = snap("b".repeat(INLINE_PAYLOAD_BYTES + 2 * REDIS_CHUNK_BYTES));
      // Only the publishing script carries the operation record key (`:op:`); the chunks are staged without one.
      await lost(["}:lr-staged:", ":op:", ":stage:"], () => sessions.save({ sessionId: "lr-staged", snapshot: big }));
      const loaded = (await sessions.load({ sessionId: "lr-staged" })).snapshot!;
      // Compared as bytes: a deep comparison of 2 MiB element by element takes minutes.
      expect([loaded.format, Buffer.from(loaded.payload).equals(Buffer.from(big.payload))]).toEqual([big.format, true]);
      const admin = env.redis.client();
      try {
        const keys = await admin.keys("*}:lr-staged:*");
        expect(keys.filter((k) => k.includes(":stage:")), "staging lists left").toEqual([]);
        const snapshot = keys.find((k) => k.endsWith(":lr-staged:snapshot"))!;
        const chunks = keys.find((k) => k.endsWith(":lr-staged:payload"))!;
        // Published once, whole: the payload only in the chunk list, each chunk once.
        expect(await admin.hexists(snapshot, "payload")).toBe(0);
        expect(await admin.llen(chunks)).toBe(Math.ceil(big.payload.byteLength / REDIS_CHUNK_BYTES));
      } finally {
        admin.disconnect();
      }
    });

    test("Create answers OK, not ALREADY_EXISTS, and the session is stored", async () => {
      const { sessions } = env.clients;
      await lost(["}:lr-create:"], () => sessions.create({ sessionId: "lr-create", snapshot: snap("created") }));
      expect((await sessions.load({ sessionId: "lr-create" })).snapshot).toMatchObject(snap("created"));
      await expectCode(sessions.create({ sessionId: "lr-create", snapshot: snap("again") }), Code.AlreadyExists);
    });

    test("a projected Create and Delete count the metadata row once and leave one pruned lineage record (issue 12)", async () => {
      const { sessions } = env.clients;
      const byOwner = { limit: 10, ownershipEnforced: true, ownerIssuer: "lost", ownerSubject: "reply" };
      const incarnation = newIncarnation();
      const payload = sessnap({ id: "lr-meta", owner: { Issuer: "lost", Subject: "reply" }, incarnation });
      await lost(["}:lr-meta:"], () => sessions.create({ sessionId: "lr-meta", snapshot: { format: "sessnap-json/1", payload } }));
      const page = await sessions.pageMetadata(byOwner);
      expect([page.totalCount, page.sessions.map((r) => r.sessionId)]).toEqual([1, ["lr-meta"]]);
      await lost(["}:lr-meta:"], () => sessions.delete({ sessionId: "lr-meta" }));
      expect((await sessions.pageMetadata(byOwner)).totalCount).toBe(0);
      const lineage = await sessions.readLineage({ rootSessionId: "lr-meta", rootIncarnation: incarnation, limit: 10 });
      expect(lineage.records.map((r) => [r.incarnation, r.state])).toEqual([[incarnation, "pruned"]]);
    });

    test("Delete answers OK and the session and its log are gone", async () => {
      const { sessions, events } = env.clients;
      await sessions.save({ sessionId: "lr-delete", snapshot: snap("doomed") });
      await events.append({ sessionId: "lr-delete", event: ev({ n: 1 }) });
      await lost(["}:lr-delete:"], () => sessions.delete({ sessionId: "lr-delete" }));
      await expectCode(sessions.load({ sessionId: "lr-delete" }), Code.NotFound);
      expect(await readAfterAll(events, { sessionId: "lr-delete" })).toEqual([]);
    });
  });

  describe("event log", () => {
    test("Append answers position 1 and the log holds the record once", async () => {
      const { events } = env.clients;
      const r = await lost(["}:lr-append:"], () => events.append({ sessionId: "lr-append", event: ev({ n: 1 }) }));
      expect(decodeEnvelope(r.cursor).p).toBe("1");
      const log = await readAfterAll(events, { sessionId: "lr-append" });
      expect(log.map((x) => x.cursor)).toEqual([r.cursor]);
    });

    test("AppendGap answers position 2 and the log holds the gap once", async () => {
      const { events } = env.clients;
      await events.append({ sessionId: "lr-gap", event: ev({ n: 1 }) });
      const r = await lost(["}:lr-gap:"], () => events.appendGap({ sessionId: "lr-gap", reason: "lost-reply" }));
      expect(decodeEnvelope(r.cursor).p).toBe("2");
      const log = await readAfterAll(events, { sessionId: "lr-gap" });
      expect(log.map((x) => [x.kind, x.gapReason])).toEqual([
        ["event", ""],
        ["gap", "lost-reply"],
      ]);
    });
  });

  describe("session lease", () => {
    test("Acquire answers the grant (token 1) the store holds", async () => {
      const { leases } = env.clients;
      const { lease } = await lost(["}:lr-acquire:"], () => leases.acquire({ sessionId: "lr-acquire", owner: "a" }));
      expect(lease?.token).toBe(1n);
      await leases.renew({ lease });
      await expectCode(leases.acquire({ sessionId: "lr-acquire", owner: "b" }), Code.FailedPrecondition);
    });

    test("Renew answers OK and the lease stays the caller's", async () => {
      const { leases } = env.clients;
      const { lease } = await leases.acquire({ sessionId: "lr-renew", owner: "a" });
      const renewed = await lost(["}:lr-renew:"], () => leases.renew({ lease }));
      expect(renewed.lease?.token).toBe(lease?.token);
      expect(renewed.lease!.expiry!.seconds >= lease!.expiry!.seconds).toBe(true);
      await leases.renew({ lease: renewed.lease });
    });

    test("Release answers OK and the next owner gets the next token at once", async () => {
      const { leases } = env.clients;
      const { lease } = await leases.acquire({ sessionId: "lr-release", owner: "a" });
      await lost(["}:lr-release:"], () => leases.release({ lease }));
      const next = await leases.acquire({ sessionId: "lr-release", owner: "b" });
      expect(next.lease?.token).toBe(2n);
    });
  });

  describe("schedule store", () => {
    test("SaveSchedule answers OK and the schedule is stored", async () => {
      await lost(commitOf("lr-save"), () => save({ Name: "lr-save", Prompt: "kept" }, { NextFireAt: iso(T0), Enabled: true }));
      expect((await load("lr-save")).spec.Prompt).toBe("kept");
    });

    test("DeleteSchedule answers OK and the schedule is gone", async () => {
      await save({ Name: "lr-delete" });
      await lost(commitOf("lr-delete"), () => env.clients.schedules.deleteSchedule({ name: "lr-delete" }));
      await expectCode(env.clients.schedules.loadSchedule({ name: "lr-delete" }), Code.NotFound);
    });

    test("ClaimSchedule answers the claim it stored (FireCount 1), and the fire can be recorded and the schedule deleted", async () => {
      const { schedules } = env.clients;
      await save({ Name: "lr-claim" }, { NextFireAt: iso(T0), Enabled: true });
      const r = await lost(commitOf("lr-claim"), () => schedules.claimSchedule({ name: "lr-claim", now: ts(T0), nextFire: ts(T0 + 60) }));
      const claimed = readSchedule(r.schedule).state;
      expect(claimed).toMatchObject({ FireCount: 1, LastFireAt: iso(T0), NextFireAt: iso(T0 + 60), LastFireSessionID: PENDING });
      expect((await load("lr-claim")).state).toEqual(claimed);
      // The caller got its claim, so it records the fire; nothing is left pending.
      const fire = fireRecord({ ID: "lr-claim-1", ScheduleName: "lr-claim", SessionID: "s1", FiredAt: iso(T0), StartedAt: iso(T0) });
      await schedules.recordFireStart({ name: "lr-claim", fireId: "lr-claim-1", fire });
      await schedules.recordFire({ fireId: "lr-claim-1", fire: fireRecord({ ...readFire(fire), Stop: "end_turn" }) });
      await schedules.beginScheduleDelete({ name: "lr-claim", deletionId: "d1" });
    });

    test("ClaimScheduleNow answers the claim it stored (FireCount 1)", async () => {
      await save({ Name: "lr-claim-now" }, { NextFireAt: iso(T0 + 3600), Enabled: true });
      const r = await lost(commitOf("lr-claim-now"), () => env.clients.schedules.claimScheduleNow({ name: "lr-claim-now", now: ts(T0), nextFire: ts(T0 + 60) }));
      expect(readSchedule(r.schedule).state).toMatchObject({ FireCount: 1, LastFireAt: iso(T0) });
      expect((await load("lr-claim-now")).state.FireCount).toBe(1);
    });

    test("SetScheduleEnabled answers OK and the flag is stored", async () => {
      await save({ Name: "lr-enable" }, { NextFireAt: iso(T0), Enabled: true });
      await lost(commitOf("lr-enable"), () => env.clients.schedules.setScheduleEnabled({ name: "lr-enable", enabled: false }));
      expect((await load("lr-enable")).state.Enabled).toBe(false);
    });

    test("BeginScheduleDelete answers the schedule with its deletion id", async () => {
      await save({ Name: "lr-begin" });
      const r = await lost(commitOf("lr-begin"), () => env.clients.schedules.beginScheduleDelete({ name: "lr-begin", deletionId: "d1" }));
      expect(readSchedule(r.schedule).state.DeletionID).toBe("d1");
      expect((await load("lr-begin")).state.DeletionID).toBe("d1");
    });

    test("CompleteScheduleDelete answers OK, not NOT_FOUND, and the schedule is gone", async () => {
      const { schedules } = env.clients;
      await save({ Name: "lr-complete" });
      await schedules.beginScheduleDelete({ name: "lr-complete", deletionId: "d1" });
      await lost(commitOf("lr-complete"), () => schedules.completeScheduleDelete({ name: "lr-complete", deletionId: "d1" }));
      await expectCode(schedules.loadSchedule({ name: "lr-complete" }), Code.NotFound);
    });

    test("RecordFireStart, RecordFireProgress and RecordFire answer OK and store the fire once", async () => {
      const { schedules } = env.clients;
      await save({ Name: "lr-fire" }, { NextFireAt: iso(T0), Enabled: true });
      await schedules.claimSchedule({ name: "lr-fire", now: ts(T0), nextFire: ts(T0 + 60) });
      const started = { ID: "lr-fire-1", ScheduleName: "lr-fire", SessionID: "s1", FiredAt: iso(T0), StartedAt: iso(T0) };
      await lost(commitOf("lr-fire"), () => schedules.recordFireStart({ name: "lr-fire", fireId: "lr-fire-1", fire: fireRecord(started) }));
      expect((await load("lr-fire")).state).toMatchObject({ LastFireSessionID: "s1", LastFireStartedAt: iso(T0), FireCount: 1 });
      await lost(commitOf("lr-fire"), () => schedules.recordFireProgress({ name: "lr-fire", fireId: "lr-fire-1", at: ts(T0 + 5) }));
      expect(readFire((await schedules.loadFire({ fireId: "lr-fire-1" })).fire).ProgressAt).toBe(iso(T0 + 5));
      await lost(commitOf("lr-fire"), () => schedules.recordFire({ fireId: "lr-fire-1", fire: fireRecord({ ...started, ProgressAt: iso(T0 + 5), Stop: "end_turn" }) }));
      const fires = (await schedules.listFires({ scheduleName: "lr-fire" })).fires.map(readFire);
      expect(fires.map((f) => [f.ID, f.Stop])).toEqual([["lr-fire-1", "end_turn"]]);
      expect((await load("lr-fire")).state).toMatchObject({ LastFireSessionID: "s1", FireCount: 1, LastFireStartedAt: ZERO });
    });

    test("a fire mutation whose fire-record lock or apply reply is lost answers OK and stores the fire once (issue 13 two-phase commit)", async () => {
      const { schedules } = env.clients;
      await save({ Name: "lr-fire2" }, { NextFireAt: iso(T0), Enabled: true });
      const fire = { ID: "lr-fire2-1", ScheduleName: "lr-fire2", SessionID: "s2", FiredAt: iso(T0), StartedAt: iso(T0) };
      // The fire record's steps carry their step name in their operation record key.
      await lost(["}:lr-fire2-1:", ":lock"], () => schedules.recordFireStart({ name: "lr-fire2", fireId: "lr-fire2-1", fire: fireRecord(fire) }));
      await lost(["}:lr-fire2-1:", ":apply-"], () => schedules.recordFire({ fireId: "lr-fire2-1", fire: fireRecord({ ...fire, Stop: "end_turn" }) }));
      expect(readFire((await schedules.loadFire({ fireId: "lr-fire2-1" })).fire).Stop).toBe("end_turn");
      expect((await schedules.listFires({ scheduleName: "lr-fire2" })).fires.map((f) => readFire(f).ID)).toEqual(["lr-fire2-1"]);
      expect((await load("lr-fire2")).state).toMatchObject({ LastFireSessionID: "s2", LastFireStartedAt: ZERO });
    });

    test("ReArmOneShot answers OK and counts one retry, not two", async () => {
      await save({ Name: "lr-rearm", Trigger: { Cron: "", OneShot: iso(T0) } }, { NextFireAt: ZERO, Enabled: false });
      await lost(commitOf("lr-rearm"), () => env.clients.rearmer.reArmOneShot({ name: "lr-rearm", nextFire: ts(T0 + 30) }));
      expect((await load("lr-rearm")).state).toMatchObject({ OneShotRetryCount: 1, Enabled: true, NextFireAt: iso(T0 + 30) });
    });
  });
});
