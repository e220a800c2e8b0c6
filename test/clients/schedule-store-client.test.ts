import { beforeAll, describe, expect, test } from "vitest";
import { allBackends, type TestBackend } from "../helpers/backends.js";
import { serveDrivers } from "../helpers/driver-server.js";
import type { ScheduleStoreClient } from "../../clients/schedule-store-client.js";
import { ActiveFireError, DeletionPendingError, FireNotFoundError, ScheduleNotFoundError } from "../../clients/errors.js";
import { formatNanos, parseRfc3339, ZERO_TIME } from "../../clients/time.js";
import { PENDING_FIRE_SESSION_ID, type Schedule, type ScheduleFire } from "../../clients/schedule-records.js";

const S = 1_000_000_000n;
const T0 = 1_800_000_000n * S;

function schedule(name: string, state: Partial<Schedule["State"]> = {}, spec: Partial<Schedule["Spec"]> = {}): Schedule {
  return {
    Spec: { Name: name, Prompt: "p", Trigger: { Cron: "* * * * *", OneShot: ZERO_TIME }, MaxFires: 0, PlacementOwned: false, FireTimeout: 300_000_000_000, Future: { kept: true }, ...spec },
    State: { NextFireAt: formatNanos(T0), LastFireAt: ZERO_TIME, FireCount: 0, Enabled: true, DeletionID: "", LastFireSessionID: "", ...state },
  };
}

function fire(name: string, id: string, over: Partial<ScheduleFire> = {}): ScheduleFire {
  return { ID: id, ScheduleName: name, SessionID: id, FiredAt: formatNanos(T0), StartedAt: ZERO_TIME, ProgressAt: ZERO_TIME, Deadline: ZERO_TIME, Stop: "", Err: "", ...over };
}

describe.each(allBackends())("ScheduleStoreClient against a real server on $name", (backend: TestBackend) => {
  const served = serveDrivers(backend, ["schedule-store"]);
  let client: ScheduleStoreClient;
  beforeAll(() => {
    client = served.clients.scheduleStore!;
  });

  test("save and load round-trip the spec, unknown keys included, and both format tags (5.3)", async () => {
    await client.saveSchedule(schedule("sc-plain"));
    await client.saveSchedule(schedule("sc-owned", {}, { PlacementOwned: true }));
    const plain = await client.loadSchedule("sc-plain");
    expect(plain.Spec).toMatchObject({ Name: "sc-plain", Future: { kept: true }, FireTimeout: 300_000_000_000 });
    expect(plain.State.Enabled).toBe(true);
    expect((await client.loadSchedule("sc-owned")).Spec.PlacementOwned).toBe(true);
    expect((await client.listSchedules()).map((s) => s.Spec.Name)).toEqual(expect.arrayContaining(["sc-plain", "sc-owned"]));
  });

  test("an unknown schedule is ScheduleNotFoundError; delete of one is fine (5.5, 5.6)", async () => {
    const err = await client.loadSchedule("sc-none").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ScheduleNotFoundError);
    await expect(client.deleteSchedule("sc-none")).resolves.toBeUndefined();
  });

  test("due lists it at its next fire; the claim advances it once, a second claim at the same now is not found (5.5)", async () => {
    await client.saveSchedule(schedule("sc-claim"));
    expect((await client.dueSchedules(T0 - S)).map((s) => s.Spec.Name)).not.toContain("sc-claim");
    expect((await client.dueSchedules(T0)).map((s) => s.Spec.Name)).toContain("sc-claim");
    const claimed = await client.claimSchedule("sc-claim", T0, T0 + 60n * S);
    expect(claimed.State).toMatchObject({ FireCount: 1, LastFireSessionID: PENDING_FIRE_SESSION_ID, Enabled: true });
    expect(parseRfc3339(claimed.State.LastFireAt)).toBe(T0);
    expect(parseRfc3339(claimed.State.NextFireAt)).toBe(T0 + 60n * S);
    await expect(client.claimSchedule("sc-claim", T0, T0 + 60n * S)).rejects.toBeInstanceOf(ScheduleNotFoundError);
    expect((await client.dueSchedules(T0)).map((s) => s.Spec.Name)).not.toContain("sc-claim");
  });

  test("ClaimNow at the same nanosecond twice is fenced; a later now works (5.5)", async () => {
    await client.saveSchedule(schedule("sc-now"));
    const now = T0 + 123_456_789n;
    await client.claimScheduleNow("sc-now", now, T0 + 3600n * S);
    await expect(client.claimScheduleNow("sc-now", now, T0 + 3600n * S)).rejects.toBeInstanceOf(ScheduleNotFoundError);
    await expect(client.claimScheduleNow("sc-now", now + 1n, T0 + 3600n * S)).resolves.toMatchObject({ State: { FireCount: 2 } });
  });

  test("a claim without a next fire disables the schedule (5.5)", async () => {
    await client.saveSchedule(schedule("sc-last"));
    const claimed = await client.claimSchedule("sc-last", T0);
    expect(claimed.State.Enabled).toBe(false);
    expect(parseRfc3339(claimed.State.NextFireAt)).toBeUndefined();
  });

  test("fire start, progress and end are recorded and listed (5.5)", async () => {
    await client.saveSchedule(schedule("sc-fire"));
    await client.claimSchedule("sc-fire", T0, T0 + 60n * S);
    const f = fire("sc-fire", "sched--f1", { StartedAt: formatNanos(T0 + S), Deadline: formatNanos(T0 + 600n * S) });
    await client.recordFireStart("sc-fire", f);
    await client.recordFireProgress("sc-fire", "sched--f1", T0 + 5n * S);
    expect(parseRfc3339((await client.loadFire("sched--f1")).ProgressAt)).toBe(T0 + 5n * S);
    await client.recordFire({ ...f, Stop: "end_turn" });
    const fires = await client.listFires("sc-fire");
    expect(fires.map((x) => [x.ID, x.Stop])).toEqual([["sched--f1", "end_turn"]]);
    expect((await client.loadSchedule("sc-fire")).State.LastFireSessionID).toBe("sched--f1");
    await expect(client.loadFire("sched--nope")).rejects.toBeInstanceOf(FireNotFoundError);
    await expect(client.listFires("sc-none")).rejects.toBeInstanceOf(ScheduleNotFoundError);
  });

  test("deletion: a claimed fire is an ActiveFireError; a pending deletion is DeletionPendingError; complete removes it (5.5, 5.6)", async () => {
    await client.saveSchedule(schedule("sc-del"));
    await client.claimSchedule("sc-del", T0, T0 + 60n * S);
    await expect(client.beginScheduleDelete("sc-del", "d1")).rejects.toBeInstanceOf(ActiveFireError);
    await client.recordFire(fire("sc-del", "sched--d", { Stop: "end_turn" }));
    const begun = await client.beginScheduleDelete("sc-del", "d1");
    expect(begun.State).toMatchObject({ DeletionID: "d1", Enabled: false });
    await expect(client.saveSchedule(schedule("sc-del"))).rejects.toBeInstanceOf(DeletionPendingError);
    await expect(client.setScheduleEnabled("sc-del", true)).rejects.toBeInstanceOf(DeletionPendingError);
    await expect(client.completeScheduleDelete("sc-del", "other")).rejects.toBeInstanceOf(DeletionPendingError);
    await client.completeScheduleDelete("sc-del", "d1");
    await expect(client.loadSchedule("sc-del")).rejects.toBeInstanceOf(ScheduleNotFoundError);
  });

  test("set enabled flips only Enabled; re-arm enables a one-shot again (5.5)", async () => {
    await client.saveSchedule(schedule("sc-arm"));
    await client.setScheduleEnabled("sc-arm", false);
    expect((await client.loadSchedule("sc-arm")).State).toMatchObject({ Enabled: false, FireCount: 0 });
    await client.reArmOneShot("sc-arm", T0 + 7n * S);
    const armed = await client.loadSchedule("sc-arm");
    expect(armed.State).toMatchObject({ Enabled: true, OneShotRetryCount: 1 });
    expect(parseRfc3339(armed.State.NextFireAt)).toBe(T0 + 7n * S);
  });
});
