import type { WorkloadContext } from "./context.js";
import { CHECKS, digest, type SessionModel, type Violations } from "./model.js";
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
    const stored: Array<string | undefined> = [];
    for await (const r of ctx.eventLog.readAfter(s.id)) stored.push(r.kind === "event" ? digest(r.payload) : undefined);
    checkEventLog(s, stored, v);
  } catch (err) {
    v.add(CHECKS[1], `${s.id}: ${(err as Error).message}`);
  }
}

/**
 * Compares a session's log as read back (`stored`: each record's digest,
 * undefined for a gap) with the events acknowledged for it: every
 * acknowledged event in order and nothing else ("acknowledged events are
 * readable, in order"), and no event stored twice ("no write applied twice":
 * every workload event has distinct content, so two records with the same
 * digest are one append applied twice). Reports the first problem only.
 */
export function checkEventLog(s: SessionModel, stored: ReadonlyArray<string | undefined>, v: Violations): void {
  const seen = new Map<string, number>();
  for (let i = 0; i < stored.length; i++) {
    const d = stored[i];
    const earlier = d === undefined ? undefined : seen.get(d);
    if (earlier !== undefined) {
      v.add("no write applied twice", `${s.id}: records ${earlier + 1} and ${i + 1} are the same event, appended once`);
      return;
    }
    if (d !== undefined) seen.set(d, i);
    const acked = s.events[i];
    if (d === undefined || acked === undefined || d !== acked.digest) {
      v.add(CHECKS[1], `${s.id}: record ${i + 1} is ${d === undefined ? "a gap" : acked === undefined ? "beyond the acknowledged events" : "not the event appended there"}`);
      return;
    }
  }
  if (stored.length !== s.events.length) v.add(CHECKS[1], `${s.id}: read back ${stored.length} of ${s.events.length} acknowledged events`);
}

/**
 * Checks one schedule's FireCount against the claims made: it must be at
 * least the successful claims ("the store counted every claim and fire") and
 * at most those plus the claims answered UNAVAILABLE, whose outcome nobody
 * knows ("no write applied twice": a claim counted twice).
 */
export function checkFireCount(name: string, fireCount: number, claims: number, unanswered: number, v: Violations): void {
  if (fireCount < claims) v.add(CHECKS[5], `${name}: FireCount ${fireCount} after ${claims} successful claims`);
  else if (fireCount > claims + unanswered) {
    v.add("no write applied twice", `${name}: FireCount ${fireCount} after ${claims} successful claims${unanswered > 0 ? ` and ${unanswered} unanswered` : ""}`);
  }
}

async function verifySchedule(ctx: WorkloadContext, name: string, ledger: ClaimLedger): Promise<void> {
  const store = ctx.scheduleStore!;
  const check = CHECKS[5];
  try {
    const s = await store.loadSchedule(name);
    checkFireCount(name, s.State.FireCount ?? 0, ledger.claims.get(name) ?? 0, ledger.unanswered.get(name) ?? 0, ctx.violations);
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
