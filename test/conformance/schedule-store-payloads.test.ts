import { beforeAll, describe, expect, test } from "vitest";
import { Code, type Client } from "@connectrpc/connect";
import { ScheduleStoreService } from "../../gen/mecatl/driver/v1/schedule_store_pb.js";
import { conformanceBackends, type TestBackend } from "../helpers/backends.js";
import { serveSchedules } from "../helpers/schedule-server.js";
import { expectCode } from "../helpers/errors.js";
import { fireRecord, iso, OWNED, PENDING, rawScheduleRecord, readFire, readSchedule, scheduleRecord, state, T0, ts, V1 } from "../helpers/schedules.js";

const enc = new TextEncoder();

/**
 * What the driver does with the JSON it is given (wire-contract.md 5.3-5.4):
 * the Spec survives byte for byte, times are instants to the nanosecond in
 * any offset, fire records come back as sent; and the bad-request tables of
 * 8.14 answer INVALID_ARGUMENT naming the field and store nothing.
 */
describe.each(conformanceBackends())("schedule payloads on $name", (backend: TestBackend) => {
  const ctx = serveSchedules(backend);

  const load = async (name: string) => readSchedule((await ctx.client.loadSchedule({ name })).schedule);
  const names = async () => (await ctx.client.listSchedules({})).schedules.map((r) => readSchedule(r).spec.Name);

  describe("JSON fidelity", () => {
    // Unknown keys (top level and nested), odd key order, whitespace, escapes,
    // integers beyond 2^53, a float, and FireTimeout in nanoseconds.
    const specText = `{ "Zeta":1,"Name":"fid-spec","FireTimeout":9007199254740993,"Huge":123456789012345678901234567890,
      "Nested":{"b":[1,2,{"c":null}],"a":"\\u00e9\\ud83e\\udd80 é"},"MaxFires":0 ,"PlacementOwned":false,"Float":1.50e+3,"CreatedAt":"2023-11-15T00:13:20.5+02:00" }`;
    const stateText = `{"NextFireAt":"2023-11-15T00:13:20.123456789+02:00","Enabled":true,"FutureKey":[1]}`;

    test("the Spec is kept byte for byte through Save, Load, List, Due, Claim and SetEnabled", async () => {
      await ctx.client.saveSchedule({ name: "fid-spec", schedule: rawScheduleRecord(`{"Spec":${specText},"State":${stateText}}`) });
      const loaded = await load("fid-spec");
      expect(loaded.specText).toBe(specText);
      const listed = (await ctx.client.listSchedules({})).schedules.map(readSchedule).find((s) => s.spec.Name === "fid-spec");
      expect(listed?.specText).toBe(specText);
      const due = (await ctx.client.dueSchedules({ now: ts(T0, 123_456_789) })).schedules.map(readSchedule).find((s) => s.spec.Name === "fid-spec");
      expect(due?.specText).toBe(specText);
      const c = readSchedule((await ctx.client.claimSchedule({ name: "fid-spec", now: ts(T0, 123_456_789), nextFire: ts(T0 + 60) })).schedule);
      expect(c.specText).toBe(specText);
      await ctx.client.setScheduleEnabled({ name: "fid-spec", enabled: false });
      expect((await load("fid-spec")).specText).toBe(specText);
    });

    test("an overwriting Save replaces the Spec text exactly and keeps the State", async () => {
      const first = `{"Name":"fid-overwrite","MaxFires":2}`;
      const second = `{"Name":"fid-overwrite", "Extra":{"k":"v"},"FireTimeout":86400000000000}`;
      await ctx.client.saveSchedule({ name: "fid-overwrite", schedule: rawScheduleRecord(`{"Spec":${first},"State":{"NextFireAt":"${iso(T0)}","Enabled":true,"FireCount":1}}`) });
      await ctx.client.saveSchedule({ name: "fid-overwrite", schedule: rawScheduleRecord(`{"Spec":${second}}`) });
      const got = await load("fid-overwrite");
      expect(got.specText).toBe(second);
      expect(got.state).toMatchObject({ NextFireAt: iso(T0), Enabled: true, FireCount: 1 });
    });

    test("times in any offset are instants: a +02:00 NextFireAt is due at the same UTC nanosecond, not one before", async () => {
      await ctx.client.saveSchedule({ name: "fid-offset", schedule: rawScheduleRecord(`{"Spec":{"Name":"fid-offset"},"State":${stateText}}`) });
      expect((await load("fid-offset")).state.NextFireAt).toBe(iso(T0, 123_456_789));
      const dueAt = async (nanos: number) => (await ctx.client.dueSchedules({ now: ts(T0, nanos) })).schedules.map((r) => readSchedule(r).spec.Name);
      expect(await dueAt(123_456_788)).not.toContain("fid-offset");
      expect(await dueAt(123_456_789)).toContain("fid-offset");
      await expectCode(ctx.client.claimSchedule({ name: "fid-offset", now: ts(T0, 123_456_788), nextFire: ts(T0 + 60) }), Code.NotFound);
      const c = readSchedule((await ctx.client.claimSchedule({ name: "fid-offset", now: ts(T0, 123_456_789), nextFire: ts(T0 + 60, 1) })).schedule);
      expect(c.state).toMatchObject({ LastFireAt: "2023-11-14T22:13:20.123456789Z", NextFireAt: "2023-11-14T22:14:20.000000001Z", FireCount: 1 });
    });

    test("Go's zero time, null times and -05:30 offsets in a new State", async () => {
      const st = `{"NextFireAt":"2023-11-14T16:43:20-05:30","LastFireAt":null,"FireCount":4,"Enabled":false,"LastFireStartedAt":"0001-01-01T00:00:00Z"}`;
      await ctx.client.saveSchedule({ name: "fid-zero", schedule: rawScheduleRecord(`{"Spec":{"Name":"fid-zero"},"State":${st}}`) });
      expect((await load("fid-zero")).state).toEqual(state({ NextFireAt: iso(T0), FireCount: 4, Enabled: false }));
    });

    test("keys match as Go matches them: case-insensitively, and the format follows PlacementOwned", async () => {
      await ctx.client.saveSchedule({ name: "fid-case", schedule: rawScheduleRecord(`{"spec":{"name":"fid-case","placementowned":true},"STATE":{"enabled":true,"nextfireat":"${iso(T0)}"}}`, OWNED) });
      const got = await load("fid-case");
      expect(got.format).toBe(OWNED);
      expect(got.specText).toBe(`{"name":"fid-case","placementowned":true}`);
      expect(got.state).toMatchObject({ Enabled: true, NextFireAt: iso(T0) });
    });

    test("a fire record is returned byte for byte; progress rewrites only its ProgressAt", async () => {
      await ctx.client.saveSchedule({ name: "fid-fire", schedule: scheduleRecord({ Name: "fid-fire" }, { NextFireAt: iso(T0), Enabled: true }) });
      const text = `{"ID":"fid-f1", "ScheduleName":"fid-fire","SessionID":"s","FiredAt":"2023-11-15T00:13:20+02:00","StartedAt":"2023-11-15T00:13:21.000000001+02:00","ProgressAt":"0001-01-01T00:00:00Z","Deadline":"0001-01-01T00:00:00Z","Stop":"","Err":"","Future":{"x":[1e400]}}`;
      await ctx.client.recordFireStart({ name: "fid-fire", fireId: "fid-f1", fire: { format: V1, payload: enc.encode(text) } });
      const loaded = readFire((await ctx.client.loadFire({ fireId: "fid-f1" })).fire);
      expect(loaded.text).toBe(text);
      expect((await load("fid-fire")).state).toMatchObject({ LastFireStartedAt: iso(T0 + 1, 1), LastFireProgressAt: iso(T0 + 1, 1), LastFireSessionID: "s" });
      await ctx.client.recordFireProgress({ name: "fid-fire", fireId: "fid-f1", at: ts(T0 + 2, 500) });
      const progressed = readFire((await ctx.client.loadFire({ fireId: "fid-f1" })).fire);
      expect(progressed.text).toBe(text.replace(`"ProgressAt":"0001-01-01T00:00:00Z"`, `"ProgressAt":"2023-11-14T22:13:22.0000005Z"`));
      const listed = (await ctx.client.listFires({ scheduleName: "fid-fire" })).fires.map(readFire);
      expect(listed.map((f) => f.text)).toEqual([progressed.text]);
    });

    test("a key only a one-to-many case mapping would fold names no field, as in Go: a fire whose key is \"\uFB06op\" is in flight, and \"Sess\u0131onID\" is not its session", async () => {
      // JavaScript upper-cases the ligature ﬆ to "ST"; Go's decoder folds code point by code point and leaves Stop empty.
      await ctx.client.saveSchedule({ name: "fid-fire-fold", schedule: scheduleRecord({ Name: "fid-fire-fold" }) });
      const text = `{"ID":"fid-f3","ScheduleName":"fid-fire-fold","SessionID":"s","StartedAt":"${iso(T0)}","\uFB06op":"end_turn","Sess\u0131onID":"x","Se\u00DFionID":"y"}`;
      await ctx.client.recordFireStart({ name: "fid-fire-fold", fireId: "fid-f3", fire: { format: V1, payload: enc.encode(text) } });
      // The dotless i folds to no ASCII letter in Go either: the fire's session is "s".
      expect((await load("fid-fire-fold")).state).toMatchObject({ LastFireSessionID: "s" });
      await ctx.client.recordFireProgress({ name: "fid-fire-fold", fireId: "fid-f3", at: ts(T0 + 5) });
      expect(readFire((await ctx.client.loadFire({ fireId: "fid-f3" })).fire).text).toBe(text.replace(/}$/, `,"ProgressAt":"${iso(T0 + 5)}"}`));
    });

    test("progress adds ProgressAt to an in-flight record that lacks the key", async () => {
      await ctx.client.saveSchedule({ name: "fid-fire-nokey", schedule: scheduleRecord({ Name: "fid-fire-nokey" }) });
      const text = `{"ID":"fid-f2","ScheduleName":"fid-fire-nokey","StartedAt":"${iso(T0)}"}`;
      await ctx.client.recordFireStart({ name: "fid-fire-nokey", fireId: "fid-f2", fire: { format: V1, payload: enc.encode(text) } });
      await ctx.client.recordFireProgress({ name: "fid-fire-nokey", fireId: "fid-f2", at: ts(T0 + 5) });
      expect(readFire((await ctx.client.loadFire({ fireId: "fid-f2" })).fire).text).toBe(`{"ID":"fid-f2","ScheduleName":"fid-fire-nokey","StartedAt":"${iso(T0)}","ProgressAt":"${iso(T0 + 5)}"}`);
    });
  });

  describe("bad requests answer INVALID_ARGUMENT and store nothing (8.14)", () => {
    const good = scheduleRecord({ Name: "bad-target", Prompt: "original" }, { NextFireAt: iso(T0), Enabled: true });
    const goodFire = fireRecord({ ID: "bad-fire", ScheduleName: "bad-target", SessionID: "s", FiredAt: iso(T0), Stop: "end_turn" });
    const bytes = (s: string) => enc.encode(s);

    beforeAll(async () => {
      await ctx.client.saveSchedule({ name: "bad-target", schedule: good });
      await ctx.client.claimSchedule({ name: "bad-target", now: ts(T0), nextFire: ts(T0 + 60) });
    });

    const saveCases: Array<[string, string, Parameters<Client<typeof ScheduleStoreService>["saveSchedule"]>[0]]> = [
      ["blank name", "name", { name: "", schedule: good }],
      ["whitespace name", "name", { name: "  \t", schedule: good }],
      ["nil schedule", "schedule", { name: "bad-target" }],
      ["unknown format", "schedule.format", { name: "bad-target", schedule: { format: "schedule-json/99", payload: good.payload } }],
      ["empty payload", "schedule.payload", { name: "bad-target", schedule: { format: V1, payload: new Uint8Array() } }],
      ["undecodable payload", "schedule.payload", { name: "bad-target", schedule: rawScheduleRecord("{not json") }],
      ["name disagrees with Spec.Name", "name", { name: "bad-OTHER", schedule: good }],
      ["v1 format carrying owned placement", "schedule.format", { name: "bad-target", schedule: rawScheduleRecord(`{"Spec":{"Name":"bad-target","PlacementOwned":true}}`, V1) }],
      ["owned format without ownership", "schedule.format", { name: "bad-target", schedule: rawScheduleRecord(`{"Spec":{"Name":"bad-target"}}`, OWNED) }],
      ["payload not UTF-8", "schedule.payload", { name: "bad-target", schedule: { format: V1, payload: new Uint8Array([0x7b, 0xff, 0x7d]) } }],
      ["trailing text", "schedule.payload", { name: "bad-target", schedule: rawScheduleRecord(`{"Spec":{"Name":"bad-target"}} x`) }],
      ["trailing comma", "schedule.payload", { name: "bad-target", schedule: rawScheduleRecord(`{"Spec":{"Name":"bad-target",}}`) }],
      ["Spec missing", "Spec", { name: "bad-target", schedule: rawScheduleRecord(`{"State":{}}`) }],
      ["Spec not an object", "Spec", { name: "bad-target", schedule: rawScheduleRecord(`{"Spec":"bad-target"}`) }],
      ["Spec twice", "Spec", { name: "bad-target", schedule: rawScheduleRecord(`{"Spec":{"Name":"bad-target"},"spec":{"Name":"bad-target"}}`) }],
      ["Spec.Name not a string", "Spec.Name", { name: "bad-target", schedule: rawScheduleRecord(`{"Spec":{"Name":7}}`) }],
      ["Spec.MaxFires a string", "Spec.MaxFires", { name: "bad-target", schedule: rawScheduleRecord(`{"Spec":{"Name":"bad-target","MaxFires":"3"}}`) }],
      ["Spec.MaxFires a fraction", "Spec.MaxFires", { name: "bad-target", schedule: rawScheduleRecord(`{"Spec":{"Name":"bad-target","MaxFires":1.5}}`) }],
      ["Spec.MaxFires beyond int64", "Spec.MaxFires", { name: "bad-target", schedule: rawScheduleRecord(`{"Spec":{"Name":"bad-target","MaxFires":9223372036854775808}}`) }],
      ["State not an object", "State", { name: "bad-target", schedule: rawScheduleRecord(`{"Spec":{"Name":"bad-target"},"State":[]}`) }],
      ["State.NextFireAt not RFC 3339", "State.NextFireAt", { name: "bad-target", schedule: rawScheduleRecord(`{"Spec":{"Name":"bad-target"},"State":{"NextFireAt":"yesterday"}}`) }],
      ["State.NextFireAt with ten fraction digits", "State.NextFireAt", { name: "bad-target", schedule: rawScheduleRecord(`{"Spec":{"Name":"bad-target"},"State":{"NextFireAt":"2023-11-14T22:13:20.1234567891Z"}}`) }],
      ["State.NextFireAt on February 30th", "State.NextFireAt", { name: "bad-target", schedule: rawScheduleRecord(`{"Spec":{"Name":"bad-target"},"State":{"NextFireAt":"2023-02-30T00:00:00Z"}}`) }],
      ["State.FireCount a fraction", "State.FireCount", { name: "bad-target", schedule: rawScheduleRecord(`{"Spec":{"Name":"bad-target"},"State":{"FireCount":1.5}}`) }],
      ["State.Enabled a string", "State.Enabled", { name: "bad-target", schedule: rawScheduleRecord(`{"Spec":{"Name":"bad-target"},"State":{"Enabled":"true"}}`) }],
    ];

    test.each(saveCases)("SaveSchedule: %s names %s", async (_label, field, req) => {
      await expectCode(ctx.client.saveSchedule(req), Code.InvalidArgument, field);
    });

    const fireCases: Array<[string, string, { fireId: string; fire?: { format: string; payload: Uint8Array } }]> = [
      ["blank fire_id", "fire_id", { fireId: "", fire: goodFire }],
      ["nil fire", "fire", { fireId: "bad-fire" }],
      ["unknown format", "fire.format", { fireId: "bad-fire", fire: { format: "schedule-json/99", payload: goodFire.payload } }],
      ["the owned schedule format", "fire.format", { fireId: "bad-fire", fire: { format: OWNED, payload: goodFire.payload } }],
      ["empty payload", "fire.payload", { fireId: "bad-fire", fire: { format: V1, payload: new Uint8Array() } }],
      ["undecodable payload", "fire.payload", { fireId: "bad-fire", fire: { format: V1, payload: bytes("{not json") } }],
      ["fire_id disagrees with the payload ID", "fire_id", { fireId: "bad-fire-OTHER", fire: goodFire }],
      ["a malformed StartedAt", "StartedAt", { fireId: "bad-fire", fire: { format: V1, payload: bytes(`{"ID":"bad-fire","ScheduleName":"bad-target","StartedAt":"2023-11-14 22:13:20Z"}`) } }],
      ["Stop not a string", "Stop", { fireId: "bad-fire", fire: { format: V1, payload: bytes(`{"ID":"bad-fire","ScheduleName":"bad-target","Stop":true}`) } }],
    ];

    test.each(fireCases)("RecordFire: %s names %s", async (_label, field, req) => {
      await expectCode(ctx.client.recordFire(req), Code.InvalidArgument, field);
    });

    test.each(fireCases)("RecordFireStart: %s names %s", async (_label, field, req) => {
      await expectCode(ctx.client.recordFireStart({ name: "bad-target", ...req }), Code.InvalidArgument, field);
    });

    const scalarCases: Array<[string, string, () => Promise<unknown>]> = [
      ["LoadSchedule blank name", "name", () => ctx.client.loadSchedule({ name: "" })],
      ["DeleteSchedule blank name", "name", () => ctx.client.deleteSchedule({ name: "" })],
      ["ClaimSchedule blank name", "name", () => ctx.client.claimSchedule({ name: "", now: ts(T0) })],
      ["ClaimSchedule nil now", "now", () => ctx.client.claimSchedule({ name: "bad-target" })],
      ["ClaimSchedule now beyond year 9999", "now", () => ctx.client.claimSchedule({ name: "bad-target", now: ts(253_402_300_800) })],
      ["ClaimSchedule next_fire with negative nanos", "next_fire", () => ctx.client.claimSchedule({ name: "bad-target", now: ts(T0 + 60), nextFire: ts(T0, -1) })],
      ["ClaimScheduleNow blank name", "name", () => ctx.client.claimScheduleNow({ name: "", now: ts(T0) })],
      ["ClaimScheduleNow nil now", "now", () => ctx.client.claimScheduleNow({ name: "bad-target" })],
      ["SetScheduleEnabled blank name", "name", () => ctx.client.setScheduleEnabled({ name: "" })],
      ["RecordFireStart blank name", "name", () => ctx.client.recordFireStart({ name: " ", fireId: "bad-fire", fire: goodFire })],
      ["RecordFireProgress blank name", "name", () => ctx.client.recordFireProgress({ name: "", fireId: "f", at: ts(T0) })],
      ["RecordFireProgress blank fire_id", "fire_id", () => ctx.client.recordFireProgress({ name: "bad-target", fireId: "", at: ts(T0) })],
      ["RecordFireProgress nil at", "at", () => ctx.client.recordFireProgress({ name: "bad-target", fireId: "f" })],
      ["LoadFire blank fire_id", "fire_id", () => ctx.client.loadFire({ fireId: "" })],
      ["ListFires blank schedule_name", "schedule_name", () => ctx.client.listFires({ scheduleName: "" })],
      ["ReArmOneShot blank name", "name", () => ctx.rearmer.reArmOneShot({ name: "", nextFire: ts(T0) })],
      ["ReArmOneShot nil next_fire", "next_fire", () => ctx.rearmer.reArmOneShot({ name: "bad-target" })],
      ["DueSchedules nil now", "now", () => ctx.client.dueSchedules({})],
      ["BeginScheduleDelete blank name", "name", () => ctx.client.beginScheduleDelete({ name: "", deletionId: "d" })],
      ["BeginScheduleDelete blank deletion_id", "deletion_id", () => ctx.client.beginScheduleDelete({ name: "bad-target", deletionId: "" })],
      ["CompleteScheduleDelete blank name", "name", () => ctx.client.completeScheduleDelete({ name: "", deletionId: "d" })],
      ["CompleteScheduleDelete blank deletion_id", "deletion_id", () => ctx.client.completeScheduleDelete({ name: "bad-target", deletionId: "" })],
      ["a name longer than 16 KiB", "name", () => ctx.client.loadSchedule({ name: "x".repeat(16 * 1024 + 1) })],
    ];

    test.each(scalarCases)("%s names %s", async (_label, field, call) => {
      await expectCode(call(), Code.InvalidArgument, field);
    });

    test("after every bad request the store holds exactly what it held before", async () => {
      const before = await load("bad-target");
      for (const [, , req] of saveCases) await ctx.client.saveSchedule(req).catch(() => undefined);
      for (const [, , req] of fireCases) await ctx.client.recordFire(req).catch(() => undefined);
      for (const [, , req] of fireCases) await ctx.client.recordFireStart({ name: "bad-target", ...req }).catch(() => undefined);
      for (const [, , call] of scalarCases) await call().catch(() => undefined);
      const after = await load("bad-target");
      expect(after.text).toBe(before.text);
      expect(after.state).toMatchObject({ FireCount: 1, LastFireSessionID: PENDING, NextFireAt: iso(T0 + 60) });
      expect(await names()).not.toContain("bad-OTHER");
      expect((await ctx.client.listFires({ scheduleName: "bad-target" })).fires).toEqual([]);
      await expectCode(ctx.client.loadFire({ fireId: "bad-fire" }), Code.NotFound);
      // The control: the well-formed fire is accepted, so the table failed on validation alone.
      await ctx.client.recordFire({ fireId: "bad-fire", fire: goodFire });
      expect((await load("bad-target")).state.LastFireSessionID).toBe("s");
    });
  });
});
