import fc from "fast-check";
import { Code as GrpcCode, ConnectError } from "@connectrpc/connect";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { allClients, startRedisBehindProxy, type AllClients } from "../helpers/redis-behind-proxy.js";
import type { FaultProxy } from "../helpers/fault-proxy.js";
import { startServer } from "../helpers/server.js";
import { decodeEnvelope } from "../helpers/event-log.js";
import { iso, readSchedule, scheduleRecord, T0, ts, ZERO } from "../helpers/schedules.js";
import * as M from "./contract-model.js";

/** A backend the model runs against. */
export type ModelBackend = "sqlite-file" | "sqlite-memory" | "redis";

/** Every backend, in report order. */
export const MODEL_BACKENDS: readonly ModelBackend[] = ["sqlite-file", "sqlite-memory", "redis"];

/** A server under test: its address, the fault proxy in front of its Redis (redis only), and how to stop it. */
export interface ModelTarget {
  backend: ModelBackend;
  clients: AllClients;
  proxy?: FaultProxy;
  stop(): Promise<void>;
}

/** Server flags: leases never expire within a run (the model has no clock), store calls may retry for 3 s. */
const SERVE_ARGS = ["--lease-ttl", "3600s", "--store-timeout", "3s"];

/** Starts `serve all` on `backend`; Redis sits behind a fault proxy. */
export async function startModelTarget(backend: ModelBackend): Promise<ModelTarget> {
  if (backend === "redis") {
    const env = await startRedisBehindProxy(SERVE_ARGS);
    return { backend, clients: env.clients, proxy: env.proxy, stop: () => env.stop() };
  }
  const dir = backend === "sqlite-file" ? mkdtempSync(join(tmpdir(), "mecatl-model-")) : undefined;
  const server = await startServer(["--store", dir === undefined ? "sqlite::memory:" : `sqlite:${join(dir, "store.sqlite")}`, ...SERVE_ARGS]);
  return {
    backend,
    clients: allClients(server.address),
    async stop() {
      await server.stop();
      if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** What the real side of one run holds: the clients and the prefix that keeps this run's keys apart. */
interface Real {
  target: ModelTarget;
  prefix: string;
}

/**
 * The model side of one run (fast-check hands the same object to every
 * command): every state the store may be in, given the answers so far.
 */
interface Box {
  states: M.ContractState[];
}

const STATUS: Partial<Record<GrpcCode, M.Code>> = {
  [GrpcCode.NotFound]: "NOT_FOUND",
  [GrpcCode.AlreadyExists]: "ALREADY_EXISTS",
  [GrpcCode.FailedPrecondition]: "FAILED_PRECONDITION",
  [GrpcCode.Aborted]: "ABORTED",
};

/**
 * Runs one RPC and reduces its answer to an {@link M.Outcome}.
 *
 * @throws Error for any status the contract never gives these calls
 *   (UNAVAILABLE, INTERNAL...): under the injected faults the server must
 *   still answer exactly.
 */
async function outcome(label: string, call: () => Promise<unknown>): Promise<M.Outcome> {
  try {
    return { code: "OK", value: await call() };
  } catch (err) {
    const ce = ConnectError.from(err);
    const code = STATUS[ce.code];
    if (code === undefined) throw new Error(`${label} failed with ${GrpcCode[ce.code]}: ${ce.rawMessage}`);
    return { code };
  }
}

const dec = new TextDecoder();
const enc = new TextEncoder();
const seconds = (text: string) => (text === ZERO ? 0 : Date.parse(text) / 1000);

function schedState(record: Parameters<typeof readSchedule>[0]): M.SchedState {
  const st = readSchedule(record).state;
  return {
    enabled: st.Enabled,
    nextFireAt: seconds(st.NextFireAt),
    lastFireAt: seconds(st.LastFireAt),
    fireCount: st.FireCount,
    retryCount: st.OneShotRetryCount,
    deletionId: st.DeletionID,
    pending: st.LastFireSessionID === "pending",
  };
}

/** One operation of a batch, bound to the model state before the batch (which picks tokens). */
interface Bound {
  op: M.ModelOp;
  run(real: Real): Promise<M.Outcome>;
}

/** A generated operation: its label and how to bind it. */
interface OpSpec {
  label: string;
  bind(state: M.ContractState): Bound;
}

const SESSIONS = ["s0", "s1", "s2"];
const OWNERS = ["o0", "o1"];
const LEASES = ["l0", "l1"];
const SCHEDULES = ["k0", "k1"];
/** Schedule times are T0 + 0..8 s; 0 stands for the zero time. */
const time = fc.oneof({ arbitrary: fc.constant(0), weight: 1 }, { arbitrary: fc.integer({ min: 0, max: 6 }).map((k) => T0 + k), weight: 4 });
const nowArb = fc.integer({ min: 0, max: 6 }).map((k) => T0 + k);
/** Mostly enabled, so that claims often find something due. */
const enabledArb = fc.oneof({ arbitrary: fc.constant(true), weight: 3 }, { arbitrary: fc.constant(false), weight: 1 });

function spec(label: string, op: M.ModelOp, run: (c: AllClients, p: string) => Promise<unknown>): OpSpec {
  return { label, bind: () => ({ op, run: (r) => outcome(label, () => run(r.target.clients, r.prefix)) }) };
}

const sessionOps: Array<fc.Arbitrary<OpSpec>> = [
  fc.tuple(fc.constantFrom(...SESSIONS), fc.nat(99)).map(([id, n]) => {
    const payload = JSON.stringify({ n });
    return spec(`save(${id})`, M.save(id, payload), (c, p) => c.sessions.save({ sessionId: p + id, snapshot: { format: "sessnap-json/1", payload: enc.encode(payload) } }));
  }),
  fc.tuple(fc.constantFrom(...SESSIONS), fc.nat(99)).map(([id, n]) => {
    const payload = JSON.stringify({ created: n });
    return spec(`create(${id})`, M.create(id, payload), (c, p) => c.sessions.create({ sessionId: p + id, snapshot: { format: "sessnap-json/1", payload: enc.encode(payload) } }));
  }),
  fc.constantFrom(...SESSIONS).map((id) => spec(`load(${id})`, M.load(id), async (c, p) => dec.decode((await c.sessions.load({ sessionId: p + id })).snapshot!.payload))),
  fc.constantFrom(...SESSIONS).map((id) => spec(`delete(${id})`, M.deleteSession(id), (c, p) => c.sessions.delete({ sessionId: p + id }))),
  fc.tuple(fc.constantFrom(...SESSIONS), fc.nat(99)).map(([id, n]) => {
    const payload = JSON.stringify({ e: n });
    return spec(`append(${id})`, M.append(id, payload), async (c, p) => {
      const { g, p: position } = decodeEnvelope((await c.events.append({ sessionId: p + id, event: { format: "eventlog-json/1", payload: enc.encode(payload) } })).cursor);
      return { gen: g, position: Number(position) };
    });
  }),
  fc.constantFrom(...SESSIONS).map((id) =>
    spec(`read(${id})`, M.readLog(id), async (c, p) => {
      const out: string[] = [];
      for await (const r of c.events.readAfter({ sessionId: p + id })) out.push(dec.decode(r.event!.payload));
      return out;
    }),
  ),
];

/** Picks the token a renew or release sends: the holder's when `held`, else one that is not current. */
function token(state: M.ContractState, id: string, held: boolean): bigint {
  const l = state.leases.get(id);
  if (held) return l?.holder?.token ?? 1n;
  return (l?.high ?? 0n) + 3n;
}

function leaseOp(kind: "renew" | "release", id: string, owner: string, held: boolean): OpSpec {
  const label = `${kind}(${id}, ${owner}, ${held ? "held token" : "stale token"})`;
  return {
    label,
    bind(state) {
      const t = token(state, id, held);
      const op = kind === "renew" ? M.renew(id, owner, t) : M.release(id, owner, t);
      return {
        op,
        run: (r) =>
          outcome(label, async () => {
            const lease = { sessionId: r.prefix + id, owner, token: t };
            if (kind === "release") return r.target.clients.leases.release({ lease });
            return (await r.target.clients.leases.renew({ lease })).lease!.token;
          }),
      };
    },
  };
}

const leaseOps: Array<fc.Arbitrary<OpSpec>> = [
  fc.tuple(fc.constantFrom(...LEASES), fc.constantFrom(...OWNERS)).map(([id, owner]) =>
    spec(`acquire(${id}, ${owner})`, M.acquire(id, owner), async (c, p) => (await c.leases.acquire({ sessionId: p + id, owner })).lease!.token),
  ),
  fc.tuple(fc.constantFrom(...LEASES), fc.constantFrom(...OWNERS), fc.boolean()).map(([id, owner, held]) => leaseOp("renew", id, owner, held)),
  fc.tuple(fc.constantFrom(...LEASES), fc.constantFrom(...OWNERS), fc.boolean()).map(([id, owner, held]) => leaseOp("release", id, owner, held)),
];

const nextFire = (t: number) => (t === 0 ? undefined : ts(t));

const scheduleOps: Array<fc.Arbitrary<OpSpec>> = [
  fc.tuple(fc.constantFrom(...SCHEDULES), enabledArb, time).map(([name, enabled, next]) =>
    spec(`saveSchedule(${name}, ${enabled}, ${next})`, M.saveSchedule(name, enabled, next), (c, p) =>
      c.schedules.saveSchedule({ name: p + name, schedule: scheduleRecord({ Name: p + name }, { Enabled: enabled, NextFireAt: next === 0 ? ZERO : iso(next) }) }),
    ),
  ),
  fc.constantFrom(...SCHEDULES).map((name) => spec(`loadSchedule(${name})`, M.loadSchedule(name), async (c, p) => schedState((await c.schedules.loadSchedule({ name: p + name })).schedule))),
  fc.tuple(fc.constantFrom(...SCHEDULES), nowArb, time).map(([name, now, next]) =>
    spec(`claim(${name}, ${now}, ${next})`, M.claim(name, now, next), async (c, p) => schedState((await c.schedules.claimSchedule({ name: p + name, now: ts(now), nextFire: nextFire(next) })).schedule)),
  ),
  fc.tuple(fc.constantFrom(...SCHEDULES), nowArb, time).map(([name, now, next]) =>
    spec(`claimNow(${name}, ${now}, ${next})`, M.claimNow(name, now, next), async (c, p) => schedState((await c.schedules.claimScheduleNow({ name: p + name, now: ts(now), nextFire: nextFire(next) })).schedule)),
  ),
  fc.tuple(fc.constantFrom(...SCHEDULES), enabledArb).map(([name, enabled]) =>
    spec(`setEnabled(${name}, ${enabled})`, M.setEnabled(name, enabled), (c, p) => c.schedules.setScheduleEnabled({ name: p + name, enabled })),
  ),
  fc.tuple(fc.constantFrom(...SCHEDULES), nowArb).map(([name, next]) => spec(`reArm(${name}, ${next})`, M.reArm(name, next), (c, p) => c.rearmer.reArmOneShot({ name: p + name, nextFire: ts(next) }))),
  fc.constantFrom(...SCHEDULES).map((name) => spec(`deleteSchedule(${name})`, M.deleteSchedule(name), (c, p) => c.schedules.deleteSchedule({ name: p + name }))),
  fc.tuple(fc.constantFrom(...SCHEDULES), fc.constantFrom("d1", "d2")).map(([name, id]) =>
    spec(`beginDelete(${name}, ${id})`, M.beginDelete(name, id), async (c, p) => schedState((await c.schedules.beginScheduleDelete({ name: p + name, deletionId: id })).schedule)),
  ),
  fc.tuple(fc.constantFrom(...SCHEDULES), fc.constantFrom("d1", "d2")).map(([name, id]) =>
    spec(`completeDelete(${name}, ${id})`, M.completeDelete(name, id), (c, p) => c.schedules.completeScheduleDelete({ name: p + name, deletionId: id })),
  ),
];

const anyOp = fc.oneof(...sessionOps, ...leaseOps, ...scheduleOps);

/** Counts of one model run, for the long-run report. */
export interface ModelStats {
  runs: number;
  /** Operations sent (each batch counts its operations). */
  operations: number;
  /** Batches of two or three operations sent concurrently. */
  concurrentBatches: number;
  /** Replies the proxy actually lost (armed faults that fired). */
  lostReplies: number;
  resets: number;
}

/** Operations from 1 to 3 clients at once; their answers must fit some order of them. */
class Batch implements fc.AsyncCommand<Box, Real> {
  constructor(
    private readonly ops: readonly OpSpec[],
    private readonly stats: ModelStats,
  ) {}

  check(): boolean {
    return true;
  }

  async run(box: Box, real: Real): Promise<void> {
    // Tokens are only request parameters: any candidate state may choose them.
    const bound = this.ops.map((o) => o.bind(box.states[0]!));
    const got = await Promise.all(bound.map((b) => b.run(real)));
    this.stats.operations += bound.length;
    if (bound.length > 1) this.stats.concurrentBatches++;
    const result = M.linearize(box.states, bound.map((b) => b.op), got);
    if ("why" in result) throw new Error(`answers ${JSON.stringify(got, (_, v: unknown) => (typeof v === "bigint" ? String(v) : v))} fit no order of [${this.toString()}]: ${result.why}`);
    box.states = result.states;
  }

  toString(): string {
    return this.ops.map((o) => o.label).join(" || ");
  }
}

/** A fault injected between batches through the proxy in front of Redis; it does not change the model. */
class Fault implements fc.AsyncCommand<Box, Real> {
  constructor(
    private readonly name: string,
    private readonly inject: (proxy: FaultProxy) => void,
  ) {}
  check(): boolean {
    return true;
  }
  async run(_box: Box, real: Real): Promise<void> {
    this.inject(real.target.proxy!);
  }
  toString(): string {
    return this.name;
  }
}

/** The faults a run with a proxy draws from: the next script call's reply lost (connection cut), and every connection reset. */
function faults(stats: ModelStats): Array<fc.Arbitrary<Fault>> {
  const lose = new Fault("loseNextReply", (proxy) => {
    void proxy.loseNextReply({ match: (chunk) => chunk.includes("\neval") }).then(() => stats.lostReplies++);
  });
  const reset = new Fault("resetConnections", (proxy) => {
    stats.resets++;
    proxy.resetAll();
  });
  return [fc.constant(lose), fc.constant(reset)];
}

/** Options of {@link runModel}. */
export interface ModelOptions {
  runs: number;
  /** Longest command sequence of one run. */
  maxCommands: number;
  seed?: number;
}

let runCounter = 0;

/**
 * Runs fast-check's model-based test against `target`: `runs` random
 * sequences of batches (1 to 3 concurrent operations on sessions, events,
 * leases and schedules), with lost replies and connection resets between
 * batches when the target has a fault proxy; every answer is checked against
 * the contract model (contract-model.ts). Each run uses fresh keys. A failing
 * sequence is shrunk, and fast-check's report (seed, path, the minimal
 * sequence) is thrown.
 */
export async function runModel(target: ModelTarget, options: ModelOptions): Promise<ModelStats> {
  const stats: ModelStats = { runs: 0, operations: 0, concurrentBatches: 0, lostReplies: 0, resets: 0 };
  const batch = fc.array(anyOp, { minLength: 1, maxLength: 3 }).map((ops) => new Batch(ops, stats));
  const injected = target.proxy === undefined ? [] : faults(stats);
  const commands = fc.commands([batch, batch, batch, batch, ...injected], { maxCommands: options.maxCommands, size: "max" });
  try {
    await fc.assert(
      fc.asyncProperty(commands, async (cmds) => {
        stats.runs++;
        const real: Real = { target, prefix: `m${++runCounter}-${process.pid}-` };
        await fc.asyncModelRun(() => ({ model: { states: [M.emptyState()] }, real }), cmds);
      }),
      { numRuns: options.runs, seed: options.seed, endOnFailure: false },
    );
  } finally {
    // A lost reply armed by the last command of a run must not hit the next user of the proxy.
    void target.proxy?.loseNextReply({ match: () => false });
  }
  return stats;
}
