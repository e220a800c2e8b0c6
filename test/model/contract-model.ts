/**
 * A small in-memory model of the driver contract (wire-contract.md sections
 * 2.5, 3.4, 3.6, 4.3 and 5.5), written for the model-based tests from the
 * contract text and independent of the production rules: what each
 * operation must answer, and what it leaves behind. Only the parts the
 * model-based operations use are modelled (no lease expiry: the server runs
 * with a TTL far longer than a run; schedules without MaxFires or fires).
 *
 * Everything is plain data (Maps, Sets, bigints), so `structuredClone`
 * copies a state for trying the orders in which concurrent operations may
 * have applied.
 */

/** A gRPC status code name as the tests compare them, or `OK`. */
export type Code = "OK" | "NOT_FOUND" | "ALREADY_EXISTS" | "FAILED_PRECONDITION" | "ABORTED";

/** What a call answered, reduced to what the contract fixes. */
export interface Outcome {
  code: Code;
  /** The answer's content that matters: a payload, a position, a token, a schedule state. */
  value?: unknown;
}

/** One session's event log: its generation once the first record is appended, and the records' payload texts. */
interface Log {
  gen?: string;
  entries: string[];
}

/** The schedule State fields the model tracks; times are whole seconds, 0 for the zero time. */
export interface SchedState {
  enabled: boolean;
  nextFireAt: number;
  lastFireAt: number;
  fireCount: number;
  retryCount: number;
  deletionId: string;
  /** `LastFireSessionID == "pending"` (claimed, fire not recorded). */
  pending: boolean;
}

/** The whole modelled store. */
export interface ContractState {
  snapshots: Map<string, string>;
  logs: Map<string, Log>;
  /** Every generation a session's log has had: a new log must get a new one. */
  gens: Map<string, Set<string>>;
  leases: Map<string, { holder?: { owner: string; token: bigint }; high: bigint }>;
  schedules: Map<string, SchedState>;
}

/** An empty store. */
export function emptyState(): ContractState {
  return { snapshots: new Map(), logs: new Map(), gens: new Map(), leases: new Map(), schedules: new Map() };
}

/**
 * One operation as the model sees it. `step` is given the state before the
 * operation and what the server answered; it returns why the answer breaks
 * the contract, or undefined when it is right (then it has moved `state` to
 * the state after the operation). The answer is an input so that values
 * the contract leaves open (a new log's generation) can be bound.
 */
export interface ModelOp {
  /** e.g. `append(s1)` — for failure reports. */
  readonly label: string;
  step(state: ContractState, got: Outcome): string | undefined;
}

function expectCode(got: Outcome, want: Code): string | undefined {
  return got.code === want ? undefined : `answered ${got.code}, the contract says ${want}`;
}

function same(got: unknown, want: unknown, what: string): string | undefined {
  return JSON.stringify(got) === JSON.stringify(want) ? undefined : `${what} ${JSON.stringify(got)}, the contract says ${JSON.stringify(want)}`;
}

// ---- session store (section 2.5) and event log (sections 3.4, 3.6) ----

/** Save: upsert, always OK. */
export const save = (id: string, payload: string): ModelOp => ({
  label: `save(${id})`,
  step(s, got) {
    s.snapshots.set(id, payload);
    return expectCode(got, "OK");
  },
});

/** Create: OK when absent, ALREADY_EXISTS (nothing changed) when present. */
export const create = (id: string, payload: string): ModelOp => ({
  label: `create(${id})`,
  step(s, got) {
    if (s.snapshots.has(id)) return expectCode(got, "ALREADY_EXISTS");
    s.snapshots.set(id, payload);
    return expectCode(got, "OK");
  },
});

/** Load: the last snapshot, or NOT_FOUND. */
export const load = (id: string): ModelOp => ({
  label: `load(${id})`,
  step(s, got) {
    const want = s.snapshots.get(id);
    if (want === undefined) return expectCode(got, "NOT_FOUND");
    return expectCode(got, "OK") ?? same(got.value, want, "payload");
  },
});

/** Delete: idempotent; the session's event log goes with it, so the next append starts a new generation. */
export const deleteSession = (id: string): ModelOp => ({
  label: `delete(${id})`,
  step(s, got) {
    s.snapshots.delete(id);
    s.logs.delete(id);
    return expectCode(got, "OK");
  },
});

/** Append: OK at position = previous length + 1, in the log's generation (a new one for a new log). */
export const append = (id: string, payload: string): ModelOp => ({
  label: `append(${id})`,
  step(s, got) {
    const bad = expectCode(got, "OK");
    if (bad !== undefined) return bad;
    const { gen, position } = got.value as { gen: string; position: number };
    const log = s.logs.get(id) ?? { entries: [] };
    if (position !== log.entries.length + 1) return `appended at position ${position}, the contract says ${log.entries.length + 1}`;
    const seen = s.gens.get(id) ?? new Set<string>();
    if (log.gen === undefined) {
      if (seen.has(gen)) return `a new log reused generation ${gen}`;
      log.gen = gen;
      seen.add(gen);
      s.gens.set(id, seen);
    } else if (gen !== log.gen) return `generation ${gen}, the log has ${log.gen}`;
    log.entries.push(payload);
    s.logs.set(id, log);
    return undefined;
  },
});

/** Reading the whole log: every record once, in order (an empty answer for no log). */
export const readLog = (id: string): ModelOp => ({
  label: `read(${id})`,
  step(s, got) {
    return expectCode(got, "OK") ?? same(got.value, s.logs.get(id)?.entries ?? [], "records");
  },
});

// ---- session lease (section 4.3), never expiring within a run ----

type LeaseSlot = { holder?: { owner: string; token: bigint }; high: bigint };

function slot(s: ContractState, id: string): LeaseSlot {
  return s.leases.get(id) ?? { high: 0n };
}

/** Acquire: free → token high + 1; held by the same owner → same token; by another → FAILED_PRECONDITION. */
export const acquire = (id: string, owner: string): ModelOp => ({
  label: `acquire(${id}, ${owner})`,
  step(s, got) {
    const l = slot(s, id);
    if (l.holder !== undefined && l.holder.owner !== owner) return expectCode(got, "FAILED_PRECONDITION");
    const token = l.holder?.token ?? l.high + 1n;
    s.leases.set(id, { holder: { owner, token }, high: token > l.high ? token : l.high });
    return expectCode(got, "OK") ?? same(String(got.value), String(token), "token");
  },
});

/** Renew: OK (same token) only for the current holder with its token; otherwise FAILED_PRECONDITION. */
export const renew = (id: string, owner: string, token: bigint): ModelOp => ({
  label: `renew(${id}, ${owner}, ${token})`,
  step(s, got) {
    const h = slot(s, id).holder;
    if (h === undefined || h.owner !== owner || h.token !== token) return expectCode(got, "FAILED_PRECONDITION");
    return expectCode(got, "OK") ?? same(String(got.value), String(token), "token");
  },
});

/** Release: always OK; frees the lease only when owner and token match. The high-water mark stays. */
export const release = (id: string, owner: string, token: bigint): ModelOp => ({
  label: `release(${id}, ${owner}, ${token})`,
  step(s, got) {
    const l = slot(s, id);
    if (l.holder !== undefined && l.holder.owner === owner && l.holder.token === token) s.leases.set(id, { high: l.high });
    return expectCode(got, "OK");
  },
});

// ---- schedule store (section 5.5), MaxFires 0, no fire records ----

function dueAt(st: SchedState, now: number): boolean {
  return st.enabled && st.deletionId === "" && st.nextFireAt !== 0 && st.nextFireAt <= now;
}

function advance(st: SchedState, now: number, next: number): SchedState {
  return { ...st, lastFireAt: now, nextFireAt: next, fireCount: st.fireCount + 1, pending: true, enabled: next === 0 ? false : st.enabled };
}

/** The schedule `name` after a rule; `want` is what the answer must carry (the claimed or deleting record). */
function answerWith(got: Outcome, want: SchedState): string | undefined {
  return expectCode(got, "OK") ?? same(got.value, want, "schedule state");
}

/** SaveSchedule: new → the given State (a zero State stored enabled); existing → Spec replaced, State kept; deletion pending → ABORTED. */
export const saveSchedule = (name: string, enabled: boolean, nextFireAt: number): ModelOp => ({
  label: `saveSchedule(${name}, ${enabled}, ${nextFireAt})`,
  step(s, got) {
    const st = s.schedules.get(name);
    if (st?.deletionId) return expectCode(got, "ABORTED");
    if (st === undefined) {
      const zero = nextFireAt === 0 && !enabled;
      s.schedules.set(name, { enabled: zero ? true : enabled, nextFireAt, lastFireAt: 0, fireCount: 0, retryCount: 0, deletionId: "", pending: false });
    }
    return expectCode(got, "OK");
  },
});

/** LoadSchedule: the State, or NOT_FOUND. */
export const loadSchedule = (name: string): ModelOp => ({
  label: `loadSchedule(${name})`,
  step(s, got) {
    const st = s.schedules.get(name);
    if (st === undefined) return expectCode(got, "NOT_FOUND");
    return answerWith(got, st);
  },
});

/** ClaimSchedule: due → advanced and returned; otherwise (or unknown) NOT_FOUND. */
export const claim = (name: string, now: number, next: number): ModelOp => ({
  label: `claim(${name}, ${now}, ${next})`,
  step(s, got) {
    const st = s.schedules.get(name);
    if (st === undefined || !dueAt(st, now)) return expectCode(got, "NOT_FOUND");
    const after = advance(st, now, next);
    s.schedules.set(name, after);
    return answerWith(got, after);
  },
});

/** ClaimScheduleNow: like Claim without the due check, fenced by LastFireAt == now. */
export const claimNow = (name: string, now: number, next: number): ModelOp => ({
  label: `claimNow(${name}, ${now}, ${next})`,
  step(s, got) {
    const st = s.schedules.get(name);
    if (st === undefined || !st.enabled || st.deletionId !== "" || st.lastFireAt === now) return expectCode(got, "NOT_FOUND");
    const after = advance(st, now, next);
    s.schedules.set(name, after);
    return answerWith(got, after);
  },
});

/** SetScheduleEnabled: only Enabled; unknown → NOT_FOUND; deletion pending → ABORTED. */
export const setEnabled = (name: string, enabled: boolean): ModelOp => ({
  label: `setEnabled(${name}, ${enabled})`,
  step(s, got) {
    const st = s.schedules.get(name);
    if (st === undefined) return expectCode(got, "NOT_FOUND");
    if (st.deletionId !== "") return expectCode(got, "ABORTED");
    s.schedules.set(name, { ...st, enabled });
    return expectCode(got, "OK");
  },
});

/** ReArmOneShot: enabled, NextFireAt = next, OneShotRetryCount + 1; unknown → NOT_FOUND; deletion pending → ABORTED. */
export const reArm = (name: string, next: number): ModelOp => ({
  label: `reArm(${name}, ${next})`,
  step(s, got) {
    const st = s.schedules.get(name);
    if (st === undefined) return expectCode(got, "NOT_FOUND");
    if (st.deletionId !== "") return expectCode(got, "ABORTED");
    s.schedules.set(name, { ...st, enabled: true, nextFireAt: next, retryCount: st.retryCount + 1 });
    return expectCode(got, "OK");
  },
});

/** DeleteSchedule: idempotent; deletion pending → ABORTED. */
export const deleteSchedule = (name: string): ModelOp => ({
  label: `deleteSchedule(${name})`,
  step(s, got) {
    if (s.schedules.get(name)?.deletionId) return expectCode(got, "ABORTED");
    s.schedules.delete(name);
    return expectCode(got, "OK");
  },
});

/** BeginScheduleDelete: unknown → NOT_FOUND; already deleting → OK unchanged; claimed fire → FAILED_PRECONDITION; else disabled with the id. */
export const beginDelete = (name: string, deletionId: string): ModelOp => ({
  label: `beginDelete(${name}, ${deletionId})`,
  step(s, got) {
    const st = s.schedules.get(name);
    if (st === undefined) return expectCode(got, "NOT_FOUND");
    if (st.deletionId !== "") return answerWith(got, st);
    if (st.pending) return expectCode(got, "FAILED_PRECONDITION");
    const after = { ...st, enabled: false, deletionId };
    s.schedules.set(name, after);
    return answerWith(got, after);
  },
});

/** CompleteScheduleDelete: removes the schedule when its DeletionID is `deletionId`; otherwise ABORTED. */
export const completeDelete = (name: string, deletionId: string): ModelOp => ({
  label: `completeDelete(${name}, ${deletionId})`,
  step(s, got) {
    if (s.schedules.get(name)?.deletionId !== deletionId) return expectCode(got, "ABORTED");
    s.schedules.delete(name);
    return expectCode(got, "OK");
  },
});

/** A canonical text of a state, equal for equal states whatever the order their Maps were filled in. */
function stateKey(state: ContractState): string {
  return JSON.stringify(state, (_k, v: unknown) => {
    if (typeof v === "bigint") return `${v}n`;
    if (v instanceof Map) return [...v.entries()].sort(([a], [b]) => (String(a) < String(b) ? -1 : 1));
    if (v instanceof Set) return [...v].sort();
    return v;
  });
}

/** Most candidate states kept at once; more means the test's operations are too ambiguous to check. */
export const MAX_CANDIDATES = 256;

/**
 * Checks answers of operations that ran concurrently (linearizability over
 * at most a few operations): for every state the store may be in
 * (`states`: answers so far can leave it open, e.g. a Save and a Delete
 * that both answered OK, in either order) and every order of `ops`, applies
 * them one by one; each that gives exactly the answers seen yields a state
 * the store may now be in.
 *
 * @returns every such state (deduplicated), or the reasons no order fits any state.
 */
export function linearize(states: readonly ContractState[], ops: readonly ModelOp[], got: readonly Outcome[]): { states: ContractState[] } | { why: string } {
  const reasons: string[] = [];
  const next = new Map<string, ContractState>();
  for (const state of states) {
    for (const order of permutations(ops.map((_, i) => i))) {
      const s = structuredClone(state);
      const bad = order.find((i) => {
        const why = ops[i]!.step(s, got[i]!);
        if (why !== undefined && reasons.length < 4) reasons.push(`${order.map((j) => ops[j]!.label).join(" then ")}: ${ops[i]!.label} ${why}`);
        return why !== undefined;
      });
      if (bad === undefined) next.set(stateKey(s), s);
    }
  }
  if (next.size === 0) return { why: reasons.join("; ") };
  if (next.size > MAX_CANDIDATES) return { why: `${next.size} possible states; the sequence is too ambiguous to check` };
  return { states: [...next.values()] };
}

function* permutations(items: number[]): Generator<number[]> {
  if (items.length <= 1) {
    yield items;
    return;
  }
  for (let i = 0; i < items.length; i++) {
    const rest = [...items.slice(0, i), ...items.slice(i + 1)];
    for (const p of permutations(rest)) yield [items[i]!, ...p];
  }
}
