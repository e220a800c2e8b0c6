import { describe, expect, test } from "vitest";
import { Code } from "@connectrpc/connect";
import { conformanceBackends, type TestBackend } from "../helpers/backends.js";
import { serveSchedules } from "../helpers/schedule-server.js";
import { expectCode } from "../helpers/errors.js";
import { fireRecord, iso, OWNED, PENDING, rawScheduleRecord, readFire, readSchedule, scheduleRecord, T0, ts, V1, ZERO, type SpecInit, type State } from "../helpers/schedules.js";

/**
 * ScheduleStoreService and ScheduleOneShotReArmerService against every
 * backend: every case of scheduleconformance.Run (wire-contract.md 8.13), the
 * server-side cases of schedulestore_test.go (8.14), and the deletion rules
 * of section 5.5.
 */
describe.each(conformanceBackends())("ScheduleStoreService on $name", (backend: TestBackend) => {
  const ctx = serveSchedules(backend);

  const save = (spec: SpecInit, st: Partial<State> = {}) => ctx.client.saveSchedule({ name: spec.Name, schedule: scheduleRecord(spec, st) });
  const load = async (name: string) => readSchedule((await ctx.client.loadSchedule({ name })).schedule);
  const claim = async (name: string, now: number, next?: number) =>
    readSchedule((await ctx.client.claimSchedule({ name, now: ts(now), nextFire: next === undefined ? undefined : ts(next) })).schedule);
  const claimNow = async (name: string, now: number, next?: number) =>
    readSchedule((await ctx.client.claimScheduleNow({ name, now: ts(now), nextFire: next === undefined ? undefined : ts(next) })).schedule);
  const dueNames = async (now: number) => (await ctx.client.dueSchedules({ now: ts(now) })).schedules.map((r) => String(readSchedule(r).spec.Name));
  const fires = async (name: string) => (await ctx.client.listFires({ scheduleName: name })).fires.map(readFire);
  /** A saved recurring schedule due at T0, claimed at T0 with the next fire a minute on. */
  const claimed = async (name: string) => {
    await save({ Name: name }, { NextFireAt: iso(T0), Enabled: true });
    await claim(name, T0, T0 + 60);
  };

  describe("scheduleconformance (8.13)", () => {
    test("save/load round-trips spec and state", async () => {
      await save({ Name: "conf-rt", Prompt: "rotate the keys", Profile: "no-fs", MaxFires: 3, Mutating: true, CreatedAt: iso(T0) }, { NextFireAt: iso(T0 + 60), Enabled: true });
      const got = await load("conf-rt");
      expect(got.format).toBe(V1);
      expect(got.spec).toMatchObject({ Name: "conf-rt", Prompt: "rotate the keys", Profile: "no-fs", MaxFires: 3, Mutating: true, CreatedAt: iso(T0) });
      expect(got.state.NextFireAt).toBe(iso(T0 + 60));
      expect(got.state.Enabled).toBe(true);
    });

    test("save preserves existing firing state on overwrite; the Spec is replaced", async () => {
      await save({ Name: "conf-preserve", Prompt: "v1" }, { NextFireAt: iso(T0 + 60), LastFireAt: iso(T0), FireCount: 2, Enabled: true, LastFireSessionID: "sess-1" });
      await save({ Name: "conf-preserve", Prompt: "v2", Mutating: true }, {});
      const got = await load("conf-preserve");
      expect(got.spec.Prompt).toBe("v2");
      expect(got.state).toMatchObject({ FireCount: 2, LastFireSessionID: "sess-1", NextFireAt: iso(T0 + 60), LastFireAt: iso(T0), Enabled: true });
    });

    test("a new schedule defaults to enabled; an explicit disabled State is honoured", async () => {
      await save({ Name: "conf-new-default" }, {});
      expect((await load("conf-new-default")).state.Enabled).toBe(true);
      await save({ Name: "conf-new-disabled" }, { NextFireAt: iso(T0 + 60), Enabled: false });
      expect((await load("conf-new-disabled")).state.Enabled).toBe(false);
    });

    test("load of an unknown schedule is NOT_FOUND", async () => {
      await expectCode(ctx.client.loadSchedule({ name: "conf-missing" }), Code.NotFound, "conf-missing");
    });

    test("delete is idempotent", async () => {
      await save({ Name: "conf-del" });
      await ctx.client.deleteSchedule({ name: "conf-del" });
      await expectCode(ctx.client.loadSchedule({ name: "conf-del" }), Code.NotFound);
      await ctx.client.deleteSchedule({ name: "conf-del" });
      await ctx.client.deleteSchedule({ name: "conf-never" });
    });

    test("list returns every saved schedule", async () => {
      const names = ["conf-list-a", "conf-list-b", "conf-list-c"];
      for (const n of names) await save({ Name: n });
      const listed = (await ctx.client.listSchedules({})).schedules.map((r) => String(readSchedule(r).spec.Name));
      expect(listed).toEqual(expect.arrayContaining(names));
      expect(new Set(listed).size).toBe(listed.length);
    });

    test("due filters on NextFireAt, Enabled and MaxFires (only 1 of 4 due)", async () => {
      const now = T0 + 10_000;
      await save({ Name: "conf-due-due" }, { NextFireAt: iso(now - 1), Enabled: true });
      await save({ Name: "conf-due-future" }, { NextFireAt: iso(now + 3600), Enabled: true });
      await save({ Name: "conf-due-disabled" }, { NextFireAt: iso(now - 1), Enabled: false });
      await save({ Name: "conf-due-exhausted", MaxFires: 2 }, { NextFireAt: iso(now - 1), Enabled: true, FireCount: 2 });
      const due = (await dueNames(now)).filter((n) => n.startsWith("conf-due-"));
      expect(due).toEqual(["conf-due-due"]);
    });

    test("claim is the atomic advance, and it is persisted", async () => {
      await save({ Name: "conf-claim" }, { NextFireAt: iso(T0), Enabled: true });
      const c = await claim("conf-claim", T0, T0 + 60);
      expect(c.state).toMatchObject({ LastFireAt: iso(T0), NextFireAt: iso(T0 + 60), FireCount: 1, LastFireSessionID: PENDING, Enabled: true });
      expect((await load("conf-claim")).state).toMatchObject({ NextFireAt: iso(T0 + 60), FireCount: 1 });
    });

    test("claim excludes the slot from due", async () => {
      const now = T0 + 20_000;
      await save({ Name: "conf-claim-due" }, { NextFireAt: iso(now), Enabled: true });
      expect(await dueNames(now)).toContain("conf-claim-due");
      await claim("conf-claim-due", now, now + 60);
      expect(await dueNames(now)).not.toContain("conf-claim-due");
    });

    test("a second claim at the same now is NOT_FOUND (at-most-once)", async () => {
      await save({ Name: "conf-atmostonce" }, { NextFireAt: iso(T0), Enabled: true });
      await claim("conf-atmostonce", T0, T0 + 60);
      await expectCode(ctx.client.claimSchedule({ name: "conf-atmostonce", now: ts(T0), nextFire: ts(T0 + 60) }), Code.NotFound);
    });

    test("claim of an unknown schedule is NOT_FOUND", async () => {
      await expectCode(ctx.client.claimSchedule({ name: "conf-claim-missing", now: ts(T0), nextFire: ts(T0 + 60) }), Code.NotFound);
    });

    test("record fire updates the last session and is idempotent per fire id", async () => {
      await claimed("conf-record");
      expect((await load("conf-record")).state.LastFireSessionID).toBe(PENDING);
      await ctx.client.recordFire({ fireId: "fire-1", fire: fireRecord({ ID: "fire-1", ScheduleName: "conf-record", SessionID: "real-session-1", FiredAt: iso(T0), Stop: "end_turn" }) });
      expect((await load("conf-record")).state.LastFireSessionID).toBe("real-session-1");
      await ctx.client.recordFire({ fireId: "fire-1", fire: fireRecord({ ID: "fire-1", ScheduleName: "conf-record", SessionID: "real-session-2", FiredAt: iso(T0), Stop: "error", Err: "transient" }) });
      expect((await load("conf-record")).state.LastFireSessionID).toBe("real-session-1");
      const f = readFire((await ctx.client.loadFire({ fireId: "fire-1" })).fire);
      expect(f).toMatchObject({ ID: "fire-1", SessionID: "real-session-1", Stop: "end_turn", Err: "" });
      expect(await fires("conf-record")).toHaveLength(1);
    });

    test("record fire start persists the in-flight state", async () => {
      await claimed("conf-firestart");
      const st = (await load("conf-firestart")).state;
      expect(st).toMatchObject({ LastFireStartedAt: ZERO, LastFireSessionID: PENDING });
      await ctx.client.recordFireStart({
        name: "conf-firestart",
        fireId: "fire-inflight",
        fire: fireRecord({ ID: "fire-inflight", ScheduleName: "conf-firestart", SessionID: "real-session-1", FiredAt: iso(T0), StartedAt: iso(T0 + 1), Deadline: iso(T0 + 301) }),
      });
      expect((await load("conf-firestart")).state).toMatchObject({
        LastFireSessionID: "real-session-1",
        LastFireStartedAt: iso(T0 + 1),
        LastFireProgressAt: iso(T0 + 1),
        FireDeadline: iso(T0 + 301),
      });
      const list = await fires("conf-firestart");
      expect(list.map((f) => [f.ID, f.Stop, f.StartedAt, f.ProgressAt])).toEqual([["fire-inflight", "", iso(T0 + 1), ZERO]]);
    });

    test("record fire start is idempotent per fire id", async () => {
      await claimed("conf-firestart-idem");
      const rec = fireRecord({ ID: "fire-idem", ScheduleName: "conf-firestart-idem", SessionID: "real-session-idem", FiredAt: iso(T0), StartedAt: iso(T0 + 1) });
      await ctx.client.recordFireStart({ name: "conf-firestart-idem", fireId: "fire-idem", fire: rec });
      await ctx.client.recordFireProgress({ name: "conf-firestart-idem", fireId: "fire-idem", at: ts(T0 + 5) });
      await ctx.client.recordFireStart({ name: "conf-firestart-idem", fireId: "fire-idem", fire: rec });
      // The repeat changed nothing: progress was not reset to the start instant.
      expect((await load("conf-firestart-idem")).state).toMatchObject({ LastFireStartedAt: iso(T0 + 1), LastFireProgressAt: iso(T0 + 5) });
      expect(await fires("conf-firestart-idem")).toHaveLength(1);
    });

    test("record fire progress advances, never rewinds, and advances the fire record", async () => {
      const name = "conf-fireprogress";
      await claimed(name);
      await ctx.client.recordFireStart({ name, fireId: "fire-progress", fire: fireRecord({ ID: "fire-progress", ScheduleName: name, SessionID: "s", FiredAt: iso(T0), StartedAt: iso(T0 + 1) }) });
      await ctx.client.recordFireProgress({ name, fireId: "fire-progress", at: ts(T0 + 11) });
      expect((await load(name)).state.LastFireProgressAt).toBe(iso(T0 + 11));
      await ctx.client.recordFireProgress({ name, fireId: "fire-progress", at: ts(T0 + 6) });
      expect((await load(name)).state.LastFireProgressAt).toBe(iso(T0 + 11));
      await ctx.client.recordFireProgress({ name, fireId: "fire-progress", at: ts(T0 + 71, 5) });
      expect((await load(name)).state.LastFireProgressAt).toBe(iso(T0 + 71, 5));
      const [f] = await fires(name);
      expect(f!.ProgressAt).toBe(iso(T0 + 71, 5));
    });

    test("record fire progress targets the named fire only; an unknown fire id is OK", async () => {
      const name = "conf-fireprogress-targeted";
      await claimed(name);
      await ctx.client.recordFireStart({ name, fireId: "fire-target-A", fire: fireRecord({ ID: "fire-target-A", ScheduleName: name, SessionID: "sess-A", FiredAt: iso(T0), StartedAt: iso(T0 + 1) }) });
      await ctx.client.recordFireStart({ name, fireId: "fire-target-B", fire: fireRecord({ ID: "fire-target-B", ScheduleName: name, SessionID: "sess-B", FiredAt: iso(T0), StartedAt: iso(T0 + 1, 1_000_000) }) });
      await ctx.client.recordFireProgress({ name, fireId: "fire-target-A", at: ts(T0 + 11) });
      const byId = new Map((await fires(name)).map((f) => [f.ID, f]));
      expect(byId.get("fire-target-A")!.ProgressAt).toBe(iso(T0 + 11));
      expect(byId.get("fire-target-B")!.ProgressAt).toBe(ZERO);
      await ctx.client.recordFireProgress({ name, fireId: "fire-nonexistent", at: ts(T0 + 21) });
      expect((await load(name)).state.LastFireProgressAt).toBe(iso(T0 + 21));
    });

    test("record fire progress does not revert a terminal fire", async () => {
      const name = "conf-fireprogress-terminal";
      await claimed(name);
      const base = { ID: "fire-terminal-prog", ScheduleName: name, SessionID: "sess-t", FiredAt: iso(T0), StartedAt: iso(T0 + 1) };
      await ctx.client.recordFireStart({ name, fireId: base.ID, fire: fireRecord(base) });
      await ctx.client.recordFire({ fireId: base.ID, fire: fireRecord({ ...base, Stop: "end_turn" }) });
      await ctx.client.recordFireProgress({ name, fireId: base.ID, at: ts(T0 + 3601) });
      const f = readFire((await ctx.client.loadFire({ fireId: base.ID })).fire);
      expect(f.Stop).toBe("end_turn");
      expect(f.ProgressAt).toBe(ZERO);
    });

    test("record fire clears the in-flight fields and flips the fire terminal", async () => {
      const name = "conf-fireclear";
      await claimed(name);
      const base = { ID: "fire-clear", ScheduleName: name, SessionID: "real-session-clear", FiredAt: iso(T0) };
      await ctx.client.recordFireStart({ name, fireId: base.ID, fire: fireRecord({ ...base, StartedAt: iso(T0 + 1), Deadline: iso(T0 + 301) }) });
      await ctx.client.recordFire({ fireId: base.ID, fire: fireRecord({ ...base, Stop: "end_turn" }) });
      expect((await load(name)).state).toMatchObject({ LastFireStartedAt: ZERO, LastFireProgressAt: ZERO, FireDeadline: ZERO, LastFireSessionID: "real-session-clear" });
      expect(readFire((await ctx.client.loadFire({ fireId: base.ID })).fire).Stop).toBe("end_turn");
    });

    test("claim alone leaves started/progress/deadline zero and the pending sentinel", async () => {
      await claimed("conf-crash-after-claim");
      expect((await load("conf-crash-after-claim")).state).toMatchObject({ LastFireStartedAt: ZERO, LastFireProgressAt: ZERO, FireDeadline: ZERO, LastFireSessionID: PENDING });
    });

    test("record fire for an unknown schedule is NOT_FOUND; LoadFire of an unknown id is NOT_FOUND", async () => {
      await expectCode(ctx.client.recordFire({ fireId: "fire-orphan", fire: fireRecord({ ID: "fire-orphan", ScheduleName: "conf-deleted-before-record", SessionID: "s" }) }), Code.NotFound);
      await expectCode(ctx.client.loadFire({ fireId: "fire-orphan" }), Code.NotFound);
      await expectCode(ctx.client.loadFire({ fireId: "conf-fire-missing" }), Code.NotFound, "conf-fire-missing");
    });

    test("list fires: empty for a new schedule, two after recording, no bleed, unknown NOT_FOUND", async () => {
      const name = "conf-listfires";
      await save({ Name: name }, { NextFireAt: iso(T0), Enabled: true });
      const empty = await ctx.client.listFires({ scheduleName: name });
      expect(empty.fires).toEqual([]);
      await claim(name, T0, T0 + 60);
      await ctx.client.recordFire({ fireId: "listfires-1", fire: fireRecord({ ID: "listfires-1", ScheduleName: name, SessionID: "sess-listfires-1", FiredAt: iso(T0), Stop: "end_turn" }) });
      await ctx.client.recordFire({ fireId: "listfires-2", fire: fireRecord({ ID: "listfires-2", ScheduleName: name, SessionID: "sess-listfires-2", FiredAt: iso(T0), Stop: "error", Err: "boom" }) });
      await claimed("conf-listfires-other");
      await ctx.client.recordFire({ fireId: "listfires-other-1", fire: fireRecord({ ID: "listfires-other-1", ScheduleName: "conf-listfires-other", SessionID: "o", FiredAt: iso(T0), Stop: "end_turn" }) });
      const byId = new Map((await fires(name)).map((f) => [f.ID, f]));
      expect([...byId.keys()].sort()).toEqual(["listfires-1", "listfires-2"]);
      expect(byId.get("listfires-1")).toMatchObject({ SessionID: "sess-listfires-1", Stop: "end_turn" });
      expect(byId.get("listfires-2")).toMatchObject({ Stop: "error", Err: "boom" });
      await expectCode(ctx.client.listFires({ scheduleName: "conf-listfires-missing" }), Code.NotFound);
    });

    test("set enabled flips only Enabled; unknown is NOT_FOUND", async () => {
      const seed = { NextFireAt: iso(T0 + 60), LastFireAt: iso(T0), FireCount: 3, Enabled: true, LastFireSessionID: "sess-pre" };
      await save({ Name: "conf-setenabled" }, seed);
      await ctx.client.setScheduleEnabled({ name: "conf-setenabled", enabled: false });
      expect((await load("conf-setenabled")).state).toMatchObject({ ...seed, Enabled: false });
      await ctx.client.setScheduleEnabled({ name: "conf-setenabled", enabled: true });
      expect((await load("conf-setenabled")).state).toMatchObject(seed);
      await expectCode(ctx.client.setScheduleEnabled({ name: "conf-setenabled-missing", enabled: false }), Code.NotFound);
    });

    test("max-fires exhaustion disables on the final claim and Due excludes it", async () => {
      await save({ Name: "conf-maxfires", MaxFires: 2 }, { NextFireAt: iso(T0), Enabled: true });
      const c1 = await claim("conf-maxfires", T0, T0 + 60);
      expect(c1.state).toMatchObject({ FireCount: 1, Enabled: true });
      const c2 = await claim("conf-maxfires", T0 + 60);
      expect(c2.state).toMatchObject({ FireCount: 2, Enabled: false, NextFireAt: ZERO });
      expect(await dueNames(T0 + 3660)).not.toContain("conf-maxfires");
    });

    test("a one-shot fires once then disables", async () => {
      await save({ Name: "conf-oneshot", Trigger: { Cron: "", OneShot: iso(T0) } }, { NextFireAt: iso(T0), Enabled: true });
      const c = await claim("conf-oneshot", T0);
      expect(c.state).toMatchObject({ FireCount: 1, Enabled: false, NextFireAt: ZERO });
      expect(await dueNames(T0 + 3600)).not.toContain("conf-oneshot");
    });

    test("misfire fire-once-now: a past-due slot is returned by Due and the claim advances to a future fire", async () => {
      const now = T0 + 3600;
      await save({ Name: "conf-misfire" }, { NextFireAt: iso(T0), Enabled: true });
      expect(await dueNames(now)).toContain("conf-misfire");
      const c = await claim("conf-misfire", now, now + 60);
      expect(c.state).toMatchObject({ NextFireAt: iso(now + 60), LastFireAt: iso(now) });
    });

    test("claim-now bypasses the due check and fences on LastFireAt", async () => {
      await save({ Name: "conf-claimnow" }, { NextFireAt: iso(T0 + 3600), Enabled: true });
      const c = await claimNow("conf-claimnow", T0, T0 + 60);
      expect(c.state).toMatchObject({ LastFireAt: iso(T0), NextFireAt: iso(T0 + 60), FireCount: 1, LastFireSessionID: PENDING, Enabled: true });
      expect((await load("conf-claimnow")).state).toMatchObject({ NextFireAt: iso(T0 + 60), FireCount: 1 });
      await expectCode(ctx.client.claimScheduleNow({ name: "conf-claimnow", now: ts(T0), nextFire: ts(T0 + 60) }), Code.NotFound);
      await claimNow("conf-claimnow", T0 + 7200, T0 + 7260);
      await save({ Name: "conf-claimnow-disabled" }, { NextFireAt: iso(T0 + 3600), Enabled: false });
      await expectCode(ctx.client.claimScheduleNow({ name: "conf-claimnow-disabled", now: ts(T0), nextFire: ts(T0 + 60) }), Code.NotFound);
      await expectCode(ctx.client.claimScheduleNow({ name: "conf-claimnow-missing", now: ts(T0), nextFire: ts(T0 + 60) }), Code.NotFound);
      await save({ Name: "conf-claimnow-exhausted", MaxFires: 1 }, { NextFireAt: iso(T0 + 3600), Enabled: true, FireCount: 1 });
      await expectCode(ctx.client.claimScheduleNow({ name: "conf-claimnow-exhausted", now: ts(T0), nextFire: ts(T0 + 60) }), Code.NotFound);
    });

    test("claim and claim-now at the same now exclude each other, both ways", async () => {
      await save({ Name: "conf-cross-a" }, { NextFireAt: iso(T0), Enabled: true });
      await claim("conf-cross-a", T0, T0 + 3660);
      await expectCode(ctx.client.claimScheduleNow({ name: "conf-cross-a", now: ts(T0), nextFire: ts(T0 + 3660) }), Code.NotFound);
      await save({ Name: "conf-cross-b" }, { NextFireAt: iso(T0), Enabled: true });
      await claimNow("conf-cross-b", T0, T0 + 3660);
      await expectCode(ctx.client.claimSchedule({ name: "conf-cross-b", now: ts(T0), nextFire: ts(T0 + 3660) }), Code.NotFound);
    });

    test("the claim-now fence compares instants to the nanosecond", async () => {
      await save({ Name: "conf-claimnow-ns" }, { NextFireAt: iso(T0 + 3600), Enabled: true });
      await claimNow("conf-claimnow-ns", T0, T0 + 60);
      await expectCode(ctx.client.claimScheduleNow({ name: "conf-claimnow-ns", now: ts(T0, 0), nextFire: ts(T0 + 60) }), Code.NotFound);
      const later = readSchedule((await ctx.client.claimScheduleNow({ name: "conf-claimnow-ns", now: ts(T0, 1), nextFire: ts(T0 + 60) })).schedule);
      expect(later.state.LastFireAt).toBe(iso(T0, 1));
    });

    test("re-arm one-shot enables, sets NextFireAt and counts; unknown is NOT_FOUND", async () => {
      await save({ Name: "conf-rearm", OneShotRetry: true, OneShotMaxRetries: 3 }, { NextFireAt: iso(T0), Enabled: true });
      await claim("conf-rearm", T0);
      expect((await load("conf-rearm")).state.Enabled).toBe(false);
      await ctx.rearmer.reArmOneShot({ name: "conf-rearm", nextFire: ts(T0 + 60) });
      expect((await load("conf-rearm")).state).toMatchObject({ Enabled: true, NextFireAt: iso(T0 + 60), OneShotRetryCount: 1 });
      await expectCode(ctx.rearmer.reArmOneShot({ name: "conf-rearm-missing", nextFire: ts(T0 + 60) }), Code.NotFound);
    });

    test("two concurrent re-arms add exactly 2", async () => {
      await save({ Name: "conf-rearm-concurrent", OneShotRetry: true, OneShotMaxRetries: 10 }, { NextFireAt: iso(T0), Enabled: true });
      await claim("conf-rearm-concurrent", T0);
      await Promise.all([0, 1].map(() => ctx.rearmer.reArmOneShot({ name: "conf-rearm-concurrent", nextFire: ts(T0 + 60) })));
      expect((await load("conf-rearm-concurrent")).state).toMatchObject({ OneShotRetryCount: 2, Enabled: true });
    });
  });

  describe("schedulestore_test.go over the wire (8.14)", () => {
    test("full spec incl. EnvironmentRef and a 5 minute FireTimeout round-trips", async () => {
      const s = { Name: "cron-sched", Prompt: "rotate the keys", Profile: "no-fs", EnvironmentRef: { Kind: "remote", ID: "opaque-placement", Revision: "r7" }, PlacementScope: "deployment-a", Mode: "default", Limits: { MaxTurns: 5, MaxToolCalls: 20, MaxConsecutiveFailures: 0 }, Mutating: true, MaxFires: 3, Singleton: true, Timezone: "UTC", CreatedAt: iso(T0), FireTimeout: 300_000_000_000 };
      await save(s, { NextFireAt: iso(T0 + 60), Enabled: true });
      const got = await load("cron-sched");
      expect(got.spec).toMatchObject(s);
      expect(got.state).toMatchObject({ NextFireAt: iso(T0 + 60), Enabled: true });
    });

    test("an owned schedule uses the versioned envelope and round-trips ownership", async () => {
      await save({ Name: "owned", PlacementOwned: true });
      const got = await load("owned");
      expect(got.format).toBe(OWNED);
      expect(got.spec.PlacementOwned).toBe(true);
      const claimedOwned = readSchedule((await ctx.client.claimScheduleNow({ name: "owned", now: ts(T0) })).schedule);
      expect(claimedOwned.format).toBe(OWNED);
      const listed = (await ctx.client.listSchedules({})).schedules.find((r) => readSchedule(r).spec.Name === "owned");
      expect(listed?.format).toBe(OWNED);
    });

    test("a one-shot schedule round-trips its trigger", async () => {
      await save({ Name: "one-shot-sched", Prompt: "once", Trigger: { Cron: "", OneShot: iso(T0 + 120) }, CreatedAt: iso(T0) }, { NextFireAt: iso(T0 + 120), Enabled: true });
      expect((await load("one-shot-sched")).spec.Trigger).toEqual({ Cron: "", OneShot: iso(T0 + 120) });
    });

    test("RecordFire is idempotent over the wire (no duplicate, original kept)", async () => {
      await claimed("rec-fire-idem");
      const f = { ID: "fire-idem-1", ScheduleName: "rec-fire-idem", SessionID: "real-session-1", FiredAt: iso(T0) };
      await ctx.client.recordFire({ fireId: f.ID, fire: fireRecord({ ...f, Stop: "end_turn" }) });
      await ctx.client.recordFire({ fireId: f.ID, fire: fireRecord({ ...f, Stop: "error", Err: "transient" }) });
      const list = await fires("rec-fire-idem");
      expect(list.map((x) => [x.ID, x.Stop])).toEqual([[f.ID, "end_turn"]]);
    });

    test("RecordFireStart, Progress, LoadFire, then a terminal RecordFire", async () => {
      const name = "rec-fire-inflight";
      await save({ Name: name, FireTimeout: 300_000_000_000 }, { NextFireAt: iso(T0), Enabled: true });
      await claim(name, T0, T0 + 60);
      const f = { ID: "fire-inflight-wire", ScheduleName: name, SessionID: "real-session-1", FiredAt: iso(T0), StartedAt: iso(T0 + 1), Deadline: iso(T0 + 301) };
      await ctx.client.recordFireStart({ name, fireId: f.ID, fire: fireRecord(f) });
      expect((await load(name)).state).toMatchObject({ LastFireSessionID: "real-session-1", LastFireStartedAt: iso(T0 + 1), FireDeadline: iso(T0 + 301) });
      await ctx.client.recordFireProgress({ name, fireId: f.ID, at: ts(T0 + 3) });
      expect((await load(name)).state.LastFireProgressAt).toBe(iso(T0 + 3));
      const inflight = readFire((await ctx.client.loadFire({ fireId: f.ID })).fire);
      expect(inflight).toMatchObject({ ID: f.ID, Stop: "", StartedAt: iso(T0 + 1), ProgressAt: iso(T0 + 3), format: V1 });
      await ctx.client.recordFire({ fireId: f.ID, fire: fireRecord({ ...f, Stop: "end_turn" }) });
      expect((await load(name)).state).toMatchObject({ LastFireStartedAt: ZERO, FireDeadline: ZERO });
      expect(readFire((await ctx.client.loadFire({ fireId: f.ID })).fire).Stop).toBe("end_turn");
    });

    test("Claim over the wire: pending sentinel, FireCount 1, Due empty after, unknown NOT_FOUND", async () => {
      const now = T0 + 50_000;
      await save({ Name: "claim-wire" }, { NextFireAt: iso(now), Enabled: true });
      expect(await dueNames(now)).toContain("claim-wire");
      const c = await claim("claim-wire", now, now + 60);
      expect(c.state).toMatchObject({ LastFireSessionID: PENDING, FireCount: 1, NextFireAt: iso(now + 60) });
      expect(await dueNames(now)).not.toContain("claim-wire");
      await expectCode(ctx.client.claimSchedule({ name: "ghost-sched", now: ts(now), nextFire: ts(now + 60) }), Code.NotFound);
    });

    test("ClaimNow fence over the wire", async () => {
      await save({ Name: "claimnow-wire" }, { NextFireAt: iso(T0 + 60), Enabled: true });
      await claimNow("claimnow-wire", T0, T0 + 60);
      await expectCode(ctx.client.claimScheduleNow({ name: "claimnow-wire", now: ts(T0), nextFire: ts(T0 + 60) }), Code.NotFound);
      await claimNow("claimnow-wire", T0 + 60, T0 + 120);
    });

    test("ReArmOneShot over the wire", async () => {
      await save({ Name: "rearm-wire", OneShotRetry: true, OneShotMaxRetries: 3 }, { NextFireAt: iso(T0), Enabled: true });
      await claim("rearm-wire", T0);
      await ctx.rearmer.reArmOneShot({ name: "rearm-wire", nextFire: ts(T0 + 60) });
      expect((await load("rearm-wire")).state).toMatchObject({ Enabled: true, NextFireAt: iso(T0 + 60), OneShotRetryCount: 1 });
    });
  });

  describe("two-phase deletion (5.5)", () => {
    test("BeginScheduleDelete disables and marks; a repeat returns the record unchanged", async () => {
      await save({ Name: "del-begin" }, { NextFireAt: iso(T0 + 60), Enabled: true });
      const begun = readSchedule((await ctx.client.beginScheduleDelete({ name: "del-begin", deletionId: "del-1" })).schedule);
      expect(begun.state).toMatchObject({ Enabled: false, DeletionID: "del-1", NextFireAt: iso(T0 + 60) });
      const again = readSchedule((await ctx.client.beginScheduleDelete({ name: "del-begin", deletionId: "del-other" })).schedule);
      expect(again.state.DeletionID).toBe("del-1");
      expect(again.text).toBe(begun.text);
    });

    test("while a deletion is pending: Save, Delete, SetEnabled and ReArm are ABORTED; Claim is NOT_FOUND; RecordFire works", async () => {
      await save({ Name: "del-pending" }, { NextFireAt: iso(T0), Enabled: true });
      await ctx.client.beginScheduleDelete({ name: "del-pending", deletionId: "del-2" });
      await expectCode(save({ Name: "del-pending", Prompt: "new" }), Code.Aborted);
      expect((await load("del-pending")).spec.Prompt).toBe("p");
      await expectCode(ctx.client.deleteSchedule({ name: "del-pending" }), Code.Aborted);
      await expectCode(ctx.client.setScheduleEnabled({ name: "del-pending", enabled: true }), Code.Aborted);
      await expectCode(ctx.rearmer.reArmOneShot({ name: "del-pending", nextFire: ts(T0) }), Code.Aborted);
      await expectCode(ctx.client.claimSchedule({ name: "del-pending", now: ts(T0), nextFire: ts(T0 + 60) }), Code.NotFound);
      await expectCode(ctx.client.claimScheduleNow({ name: "del-pending", now: ts(T0 + 1) }), Code.NotFound);
      expect(await dueNames(T0)).not.toContain("del-pending");
      await ctx.client.recordFire({ fireId: "del-pending-fire", fire: fireRecord({ ID: "del-pending-fire", ScheduleName: "del-pending", SessionID: "s", Stop: "end_turn" }) });
      expect((await load("del-pending")).state.LastFireSessionID).toBe("s");
    });

    test("BeginScheduleDelete with a claimed or running fire is FAILED_PRECONDITION; unknown is NOT_FOUND", async () => {
      await claimed("del-active-pending");
      await expectCode(ctx.client.beginScheduleDelete({ name: "del-active-pending", deletionId: "d" }), Code.FailedPrecondition);
      await ctx.client.recordFireStart({ name: "del-active-pending", fireId: "del-active-f", fire: fireRecord({ ID: "del-active-f", ScheduleName: "del-active-pending", SessionID: "s", StartedAt: iso(T0 + 1) }) });
      await expectCode(ctx.client.beginScheduleDelete({ name: "del-active-pending", deletionId: "d" }), Code.FailedPrecondition);
      await ctx.client.recordFire({ fireId: "del-active-f", fire: fireRecord({ ID: "del-active-f", ScheduleName: "del-active-pending", SessionID: "s", Stop: "end_turn" }) });
      await ctx.client.beginScheduleDelete({ name: "del-active-pending", deletionId: "d" });
      await expectCode(ctx.client.beginScheduleDelete({ name: "del-missing", deletionId: "d" }), Code.NotFound);
    });

    test("CompleteScheduleDelete removes only the marked incarnation; otherwise ABORTED", async () => {
      await save({ Name: "del-complete" });
      await expectCode(ctx.client.completeScheduleDelete({ name: "del-complete", deletionId: "d" }), Code.Aborted);
      await ctx.client.beginScheduleDelete({ name: "del-complete", deletionId: "d" });
      await expectCode(ctx.client.completeScheduleDelete({ name: "del-complete", deletionId: "other" }), Code.Aborted);
      await ctx.client.completeScheduleDelete({ name: "del-complete", deletionId: "d" });
      await expectCode(ctx.client.loadSchedule({ name: "del-complete" }), Code.NotFound);
      await expectCode(ctx.client.completeScheduleDelete({ name: "del-complete", deletionId: "d" }), Code.Aborted);
      expect((await ctx.client.listSchedules({})).schedules.map((r) => readSchedule(r).spec.Name)).not.toContain("del-complete");
      await save({ Name: "del-complete", Prompt: "again" });
      expect((await load("del-complete")).state).toMatchObject({ Enabled: true, DeletionID: "" });
    });
  });

  describe("counters at the largest Go int (issue 10, found by fuzzing)", () => {
    const MAX = "9223372036854775807";
    /** Saves a due, enabled schedule whose State counter `field` holds 2^63 - 1 (JSON.stringify cannot write it). */
    const saveAtLimit = (name: string, field: "FireCount" | "OneShotRetryCount") => {
      const record = scheduleRecord({ Name: name }, { NextFireAt: iso(T0), Enabled: true, [field]: 424242 });
      const text = new TextDecoder().decode(record.payload).replace(`"${field}":424242`, `"${field}":${MAX}`);
      return ctx.client.saveSchedule({ name, schedule: rawScheduleRecord(text) });
    };
    const stateText = async (name: string) => readSchedule((await ctx.client.loadSchedule({ name })).schedule).text;

    test("FireCount 2^63 - 1 is out of fires: not due, claims are NOT_FOUND, and the schedule still loads unchanged", async () => {
      await saveAtLimit("limit-fires", "FireCount");
      const before = await stateText("limit-fires");
      expect(before).toContain(`"FireCount":${MAX}`);
      expect(await dueNames(T0 + 1)).not.toContain("limit-fires");
      await expectCode(ctx.client.claimSchedule({ name: "limit-fires", now: ts(T0 + 1), nextFire: ts(T0 + 60) }), Code.NotFound, "out of fires");
      await expectCode(ctx.client.claimScheduleNow({ name: "limit-fires", now: ts(T0 + 2), nextFire: ts(T0 + 60) }), Code.NotFound, "out of fires");
      expect(await stateText("limit-fires")).toBe(before);
    });

    test("ReArmOneShot at OneShotRetryCount 2^63 - 1 is RESOURCE_EXHAUSTED and changes nothing", async () => {
      await saveAtLimit("limit-rearm", "OneShotRetryCount");
      const before = await stateText("limit-rearm");
      await expectCode(ctx.rearmer.reArmOneShot({ name: "limit-rearm", nextFire: ts(T0 + 60) }), Code.ResourceExhausted, "OneShotRetryCount");
      expect(await stateText("limit-rearm")).toBe(before);
    });
  });
});
