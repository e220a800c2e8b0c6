import { describe, expect, test } from "vitest";
import { ZERO_TIME_NANOS as Z } from "../../services/json/rfc3339.js";
import {
  applyMutation,
  beginDeleteRule,
  claimRule,
  completeDeleteRule,
  deleteRule,
  dueIndexKey,
  dueIndexKeyAt,
  isDue,
  recordFireProgressRule,
  recordFireRule,
  recordFireStartRule,
  reArmRule,
  saveRule,
  setEnabledRule,
} from "../../services/schedule-store/rules.js";
import { INT64_MAX, parseFire, zeroState, type FireDocument, type ScheduleDocument, type ScheduleState } from "../../services/schedule-store/schedule.js";

const S = 1_000_000_000n;
const T0 = 1_700_000_000n * S;

function sched(state: Partial<ScheduleState> = {}, maxFires = 0n): ScheduleDocument {
  return { name: "s", specText: `{"Name":"s"}`, maxFires, placementOwned: false, state: { ...zeroState(), ...state } };
}

function fire(fields: Record<string, string>): FireDocument {
  return parseFire(JSON.stringify({ ID: "f", ScheduleName: "s", ...fields }));
}

const due = sched({ nextFireAt: T0, enabled: true });

describe("save (5.5)", () => {
  test("a new zero State is stored enabled; a disabled State with a field set is honoured", () => {
    expect(saveRule(undefined, sched()).schedule?.state.enabled).toBe(true);
    expect(saveRule(undefined, sched({ nextFireAt: T0 })).schedule?.state.enabled).toBe(false);
    expect(saveRule(undefined, sched({ fireCount: 1n })).schedule?.state.enabled).toBe(false);
  });

  test("an overwrite keeps the stored State and takes the new Spec; a pending deletion refuses", () => {
    const incoming = { ...sched(), specText: `{"Name":"s","v":2}`, maxFires: 5n };
    const t = saveRule(sched({ fireCount: 3n, enabled: true }), incoming);
    expect(t.schedule).toEqual({ ...incoming, state: { ...zeroState(), fireCount: 3n, enabled: true } });
    expect(saveRule(sched({ deletionId: "d" }), incoming).reply).toEqual({ ok: false, error: "deletion_pending" });
  });
});

describe("due and claim (5.5)", () => {
  test("due compares instants to the nanosecond; the index key never excludes a due schedule", () => {
    expect(isDue(due, T0 - 1n)).toBe(false);
    expect(isDue(due, T0)).toBe(true);
    for (const next of [T0 - 1n, T0, T0 + 999_999n, -S - 1n, Z + 1n]) {
      const s = sched({ nextFireAt: next, enabled: true });
      for (const now of [next, next + 1n, next + 1_000_000n]) expect(dueIndexKey(s)! <= dueIndexKeyAt(now)).toBe(true);
    }
  });

  test("not due: disabled, unset, exhausted, deleting", () => {
    expect(isDue(sched({ nextFireAt: T0 }), T0)).toBe(false);
    expect(isDue(sched({ enabled: true }), T0)).toBe(false);
    expect(isDue(sched({ nextFireAt: T0, enabled: true, fireCount: 2n }, 2n), T0)).toBe(false);
    expect(isDue(sched({ nextFireAt: T0, enabled: true, fireCount: 2n }, -1n), T0)).toBe(true);
    expect(isDue(sched({ nextFireAt: T0, enabled: true, deletionId: "d" }), T0)).toBe(false);
    expect(dueIndexKey(sched({ nextFireAt: T0, enabled: true, deletionId: "d" }))).toBeUndefined();
  });

  test("claim advances and zeroes the in-flight fields; a second claim at the same now is not_found", () => {
    const running = { ...due, state: { ...due.state, lastFireStartedAt: T0 - S, lastFireProgressAt: T0 - S, fireDeadline: T0 + S } };
    const t = claimRule(running, T0, T0 + 60n * S, true);
    expect(t.schedule?.state).toEqual({
      ...zeroState(),
      nextFireAt: T0 + 60n * S,
      lastFireAt: T0,
      fireCount: 1n,
      enabled: true,
      lastFireSessionId: "pending",
    });
    expect(t.reply).toEqual({ ok: true, schedule: t.schedule });
    expect(claimRule(t.schedule!, T0, T0 + 60n * S, true).reply).toEqual({ ok: false, error: "not_found" });
  });

  test("a claim without a next fire disables", () => {
    expect(claimRule(due, T0, Z, true).schedule?.state).toMatchObject({ enabled: false, nextFireAt: Z, fireCount: 1n });
  });

  test("claim-now skips the due check but fences on LastFireAt", () => {
    const future = sched({ nextFireAt: T0 + 3600n * S, enabled: true });
    const t = claimRule(future, T0, T0 + 60n * S, false);
    expect(t.reply.ok).toBe(true);
    expect(claimRule(t.schedule!, T0, T0 + 60n * S, false).reply.ok).toBe(false);
    expect(claimRule(t.schedule!, T0 + 1n, T0 + 60n * S, false).reply.ok).toBe(true);
    expect(claimRule(t.schedule!, T0, T0 + 60n * S, true).reply.ok).toBe(false);
  });

  test("claims of unknown, disabled, deleting or exhausted schedules are not_found", () => {
    for (const checkDue of [true, false]) {
      expect(claimRule(undefined, T0, Z, checkDue).reply).toEqual({ ok: false, error: "not_found" });
      expect(claimRule(sched({ nextFireAt: T0 }), T0, Z, checkDue).reply.ok).toBe(false);
      expect(claimRule(sched({ nextFireAt: T0, enabled: true, deletionId: "d" }), T0, Z, checkDue).reply.ok).toBe(false);
      expect(claimRule(sched({ nextFireAt: T0, enabled: true, fireCount: 1n }, 1n), T0, Z, checkDue).reply.ok).toBe(false);
    }
  });
});

describe("enable, delete, re-arm (5.5)", () => {
  test("set enabled touches only Enabled", () => {
    expect(setEnabledRule(due, false).schedule?.state).toEqual({ ...due.state, enabled: false });
    expect(setEnabledRule(undefined, true).reply).toEqual({ ok: false, error: "not_found" });
    expect(setEnabledRule(sched({ deletionId: "d" }), true).reply).toEqual({ ok: false, error: "deletion_pending" });
  });

  test("delete is idempotent and refused while deleting", () => {
    expect(deleteRule(undefined)).toEqual({ reply: { ok: true } });
    expect(deleteRule(due).schedule).toBeNull();
    expect(deleteRule(sched({ deletionId: "d" })).reply.ok).toBe(false);
  });

  test("begin-delete: marks and disables, repeats unchanged, refuses an active fire", () => {
    const t = beginDeleteRule(due, "d1");
    expect(t.schedule?.state).toMatchObject({ enabled: false, deletionId: "d1" });
    const again = beginDeleteRule(t.schedule!, "d2");
    expect(again).toEqual({ reply: { ok: true, schedule: t.schedule } });
    expect(beginDeleteRule(sched({ lastFireSessionId: "pending" }), "d").reply).toEqual({ ok: false, error: "active_fire" });
    expect(beginDeleteRule(sched({ lastFireStartedAt: T0 }), "d").reply).toEqual({ ok: false, error: "active_fire" });
    expect(beginDeleteRule(undefined, "d").reply).toEqual({ ok: false, error: "not_found" });
  });

  test("complete-delete removes only the matching deletion", () => {
    expect(completeDeleteRule(sched({ deletionId: "d" }), "d").schedule).toBeNull();
    expect(completeDeleteRule(sched({ deletionId: "d" }), "e").reply).toEqual({ ok: false, error: "deletion_pending" });
    expect(completeDeleteRule(due, "d").reply.ok).toBe(false);
    expect(completeDeleteRule(undefined, "d").reply.ok).toBe(false);
  });

  test("re-arm enables, sets NextFireAt and counts", () => {
    expect(reArmRule(sched({ oneShotRetryCount: 4n }), T0).schedule?.state).toMatchObject({ enabled: true, nextFireAt: T0, oneShotRetryCount: 5n });
    expect(reArmRule(sched({ deletionId: "d" }), T0).reply.ok).toBe(false);
  });
});

/** Counters at the largest Go int, which the harness decodes FireCount and OneShotRetryCount as (issue 10, found by the fuzzer). */
describe("counters at 2^63 - 1", () => {
  test("FireCount 2^63 - 1 is out of fires without MaxFires: never due, not in the Due index, claims are not_found", () => {
    const spent = sched({ nextFireAt: T0, enabled: true, fireCount: INT64_MAX });
    expect(isDue(spent, T0)).toBe(false);
    expect(dueIndexKey(spent)).toBeUndefined();
    for (const checkDue of [true, false]) expect(claimRule(spent, T0, T0 + S, checkDue)).toEqual({ reply: { ok: false, error: "not_found" } });
    // One below the limit still fires, once more.
    expect(claimRule(sched({ nextFireAt: T0, enabled: true, fireCount: INT64_MAX - 1n }), T0, T0 + S, true).schedule?.state.fireCount).toBe(INT64_MAX);
  });

  test("ReArmOneShot at OneShotRetryCount 2^63 - 1 is retries_exhausted and changes nothing; one below counts up to it", () => {
    expect(reArmRule(sched({ oneShotRetryCount: INT64_MAX }), T0)).toEqual({ reply: { ok: false, error: "retries_exhausted" } });
    expect(reArmRule(sched({ oneShotRetryCount: INT64_MAX - 1n }), T0).schedule?.state.oneShotRetryCount).toBe(INT64_MAX);
  });
});

describe("fires (5.5)", () => {
  const start = "2023-11-14T22:13:21Z";

  test("record fire: terminal ids are a no-op before the schedule lookup; otherwise clears in-flight fields", () => {
    const terminal = fire({ Stop: "end_turn" });
    expect(recordFireRule(undefined, terminal, fire({ Stop: "error" }))).toEqual({ reply: { ok: true } });
    expect(recordFireRule(undefined, undefined, terminal).reply).toEqual({ ok: false, error: "not_found" });
    const running = sched({ lastFireSessionId: "pending", lastFireStartedAt: T0, lastFireProgressAt: T0, fireDeadline: T0 });
    const t = recordFireRule(running, fire({ StartedAt: start }), fire({ SessionID: "x", Stop: "end_turn" }));
    expect(t.schedule?.state).toEqual({ ...zeroState(), lastFireSessionId: "x" });
    expect(t.fire?.stop).toBe("end_turn");
    expect(recordFireRule(sched({ deletionId: "d" }), undefined, terminal).reply.ok).toBe(true);
  });

  test("record fire start seeds progress and is idempotent per start instant", () => {
    const f = fire({ SessionID: "x", StartedAt: start, Deadline: "2023-11-14T22:18:21Z" });
    const t = recordFireStartRule(due, undefined, f);
    expect(t.schedule?.state).toMatchObject({ lastFireSessionId: "x", lastFireStartedAt: T0 + S, lastFireProgressAt: T0 + S, fireDeadline: T0 + 301n * S });
    expect(t.fire).toBe(f);
    expect(recordFireStartRule(due, f, f)).toEqual({ reply: { ok: true } });
    expect(recordFireStartRule(due, fire({ Stop: "end_turn" }), f)).toEqual({ reply: { ok: true } });
    expect(recordFireStartRule(undefined, undefined, f).reply.ok).toBe(false);
    expect(recordFireStartRule(due, undefined, fire({ StartedAt: start, ProgressAt: "2023-11-14T22:13:25Z" })).schedule?.state.lastFireProgressAt).toBe(T0 + 5n * S);
  });

  test("record fire progress advances monotonically and never touches a terminal record", () => {
    const s = sched({ lastFireProgressAt: T0 });
    const inflight = fire({ StartedAt: start, ProgressAt: "2023-11-14T22:13:22Z" });
    const t = recordFireProgressRule(s, inflight, T0 + 5n * S);
    expect(t.schedule?.state.lastFireProgressAt).toBe(T0 + 5n * S);
    expect(t.fire?.progressAt).toBe(T0 + 5n * S);
    expect(recordFireProgressRule(s, inflight, T0 - S)).toEqual({ reply: { ok: true } });
    expect(recordFireProgressRule(s, inflight, Z)).toEqual({ reply: { ok: true } });
    expect(recordFireProgressRule(s, fire({ Stop: "end_turn" }), T0 + 5n * S).fire).toBeUndefined();
    expect(recordFireProgressRule(undefined, inflight, T0).reply.ok).toBe(false);
  });

  test("applyMutation dispatches by kind", () => {
    expect(applyMutation({ kind: "claim", name: "s", now: T0, nextFire: Z, checkDue: true }, due, undefined)).toEqual(claimRule(due, T0, Z, true));
    expect(applyMutation({ kind: "reArmOneShot", name: "s", nextFire: T0 }, due, undefined)).toEqual(reArmRule(due, T0));
  });
});
