import type { WorkloadContext } from "./context.js";
import { CHECKS, digest, type SessionModel } from "./model.js";
import type { ClaimLedger } from "./scheduler.js";

/** Runs `fn` over `items`, at most `limit` at a time. */
async function eachLimited<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await fn(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

async function verifySession(ctx: WorkloadContext, s: SessionModel): Promise<void> {
  const v = ctx.violations;
  try {
    const loaded = await ctx.sessionStore.load(s.id);
    if (s.snapshot !== undefined && digest(loaded.payload) !== s.snapshot.digest) {
      v.add(CHECKS[0], `${s.id}: Load returned ${loaded.payload.byteLength} bytes, not the snapshot acknowledged at turn ${s.snapshot.turn} (${s.snapshot.bytes} bytes)`);
    }
  } catch (err) {
    v.add(CHECKS[0], `${s.id}: ${(err as Error).message}`);
  }
  if (ctx.eventLog === undefined) return;
  try {
    let i = 0;
    for await (const r of ctx.eventLog.readAfter(s.id)) {
      const acked = s.events[i];
      if (r.kind !== "event" || acked === undefined || digest(r.payload) !== acked.digest) {
        v.add(CHECKS[1], `${s.id}: record ${i + 1} is ${r.kind === "gap" ? "a gap" : acked === undefined ? "beyond the acknowledged events" : "not the event appended there"}`);
        return;
      }
      i++;
    }
    if (i !== s.events.length) v.add(CHECKS[1], `${s.id}: read back ${i} of ${s.events.length} acknowledged events`);
  } catch (err) {
    v.add(CHECKS[1], `${s.id}: ${(err as Error).message}`);
  }
}

async function verifySchedule(ctx: WorkloadContext, name: string, ledger: ClaimLedger): Promise<void> {
  const store = ctx.scheduleStore!;
  const check = CHECKS[4];
  try {
    const s = await store.loadSchedule(name);
    const claims = ledger.claims.get(name) ?? 0;
    if ((s.State.FireCount ?? 0) !== claims) ctx.violations.add(check, `${name}: FireCount ${s.State.FireCount} after ${claims} successful claims`);
    const fires = new Map((await store.listFires(name)).map((f) => [f.ID, f]));
    for (const id of ledger.fires.get(name) ?? []) {
      const f = fires.get(id);
      if (f === undefined) ctx.violations.add(check, `${name}: recorded fire ${id} is not listed`);
      else if (!f.Stop) ctx.violations.add(check, `${name}: fire ${id} was recorded finished but is still in flight`);
    }
    if (fires.size !== (ledger.fires.get(name)?.size ?? 0)) ctx.violations.add(check, `${name}: ${fires.size} fires listed, ${ledger.fires.get(name)?.size ?? 0} recorded`);
  } catch (err) {
    ctx.violations.add(check, `${name}: ${(err as Error).message}`);
  }
}

/**
 * The checks after a run: every acknowledged snapshot and event reads back
 * exactly (sessions whose writes failed are skipped), every schedule's fire
 * count and fire records match the claims and fires made (schedules where a
 * claim or fire RPC failed are skipped), no slot was claimed
 * twice, and the lease history has no overlap.
 */
export async function verifyRun(ctx: WorkloadContext, sessions: readonly SessionModel[], scheduleNames: readonly string[], ledger: ClaimLedger): Promise<void> {
  await eachLimited(
    sessions.filter((s) => !s.tainted),
    4,
    (s) => verifySession(ctx, s),
  );
  if (ctx.scheduleStore !== undefined) {
    await eachLimited(
      scheduleNames.filter((n) => !ledger.uncertain.has(n)),
      4,
      (n) => verifySchedule(ctx, n, ledger),
    );
  }
  ledger.check(ctx.violations);
  ctx.leases.check(ctx.violations);
}

/** Deletes the run's sessions and schedules (failures are ignored: the checks are done). */
export async function cleanUp(ctx: WorkloadContext, sessions: readonly SessionModel[], scheduleNames: readonly string[]): Promise<void> {
  await eachLimited(sessions, 4, (s) => ctx.sessionStore.delete(s.id).catch(() => undefined));
  const store = ctx.scheduleStore;
  if (store !== undefined) await eachLimited(scheduleNames, 4, (n) => store.deleteSchedule(n).catch(() => undefined));
}
