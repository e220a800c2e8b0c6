/**
 * The RPC fuzzer of issue 10, deliverable 5: sends generated and mutated
 * request bytes (request-arbs.ts) to a real server as raw gRPC calls and
 * checks, for each one:
 * - the answer is a status the RPC defines (oracle.ts), never INTERNAL or
 *   UNKNOWN, and came before the deadline (no hang);
 * - an INVALID_ARGUMENT message starts with the field at fault (the damaged
 *   one, when a mutation damaged a single string field);
 * - a refused write stored nothing: the reads that show its keys (Load,
 *   ReadAfter, LoadSchedule, ListFires, LoadFire) answer the same before and
 *   after it, and, where the backend offers a global write counter (SQLite
 *   `PRAGMA data_version`, Redis `rdb_changes_since_last_save`), a request
 *   refused as INVALID_ARGUMENT and any read leave it unchanged;
 * - the server process is still alive.
 * Requests are sent one at a time so that these checks are exact.
 */
import * as grpc from "@grpc/grpc-js";
import { Code } from "@connectrpc/connect";
import { create, fromBinary, toBinary, type DescMessage, type DescMethod, type MessageInitShape } from "@bufbuild/protobuf";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { EventLogService } from "../../gen/mecatl/driver/v1/event_log_pb.js";
import { SessionLeaseService } from "../../gen/mecatl/driver/v1/session_lease_pb.js";
import { ScheduleOneShotReArmerService, ScheduleStoreService } from "../../gen/mecatl/driver/v1/schedule_store_pb.js";
import { Health } from "../../gen/grpc/health/v1/health_pb.js";
import { callWithBytes, type RawBytesOutcome } from "../helpers/raw-grpc.js";
import { grpcClient, MAX_MESSAGE_BYTES } from "../helpers/clients.js";
import { fireRecord, scheduleRecord, T0, iso, ts } from "../helpers/schedules.js";
import type { ServerProcess } from "../helpers/server.js";
import { FUZZED_SERVICES, type FuzzPools, type FuzzRequest } from "./request-arbs.js";
import { definedCodes, isWrite, namesField, rpcName } from "./oracle.js";

/** Reads a number that changes whenever the backend commits a write (see the module comment). */
export type WriteCounter = () => Promise<string>;

/** One finding: what was sent, what came back, and which rule it broke. */
export interface Defect {
  kind: "undefined-code" | "unnamed-field" | "stored-on-refusal" | "hang" | "crash";
  rpc: string;
  mutation: string;
  code: string;
  details: string;
  /** The request bytes, hex (cut after 2 KiB), to replay it. */
  requestHex: string;
  /** For stored-on-refusal: what changed. */
  change?: string;
}

/** Running totals of a fuzz run. */
export interface FuzzStats {
  requests: number;
  /** Answers per status code name (CANCELLED counts follow and Watch streams the fuzzer ended). */
  codes: Record<string, number>;
  /** Requests per mutation name (`none` for undamaged encodings). */
  mutations: Record<string, number>;
  /** Answers per `Service/Method`, per status code name: how deep the requests reached. */
  byRpc: Record<string, Record<string, number>>;
  /** Refused writes whose keys were checked before and after. */
  refusalsChecked: number;
  defects: Defect[];
}

const FOLLOW_IDLE_MS = 100;

/** Pool ids the fuzzer populates before the run, and the names it looks for. */
function initialPools(): FuzzPools {
  return {
    sessionIds: ["s-0", "s-1", "s-2", "s-3", "s-new"],
    scheduleNames: ["sch-0", "sch-1", "sch-2", "sch-3", "sch-new"],
    fireIds: ["f-0", "f-1", "f-2", "f-new"],
    deletionIds: ["d-0", "d-1"],
    owners: ["o-0", "o-1"],
    cursors: [],
    tokens: [],
    healthNames: ["", "unknown.Service", ...FUZZED_SERVICES.filter((s) => s !== Health).map((s) => s.typeName)],
  };
}

function decode(message: DescMessage, bytes: Uint8Array): Record<string, unknown> | undefined {
  try {
    return fromBinary(message, bytes) as unknown as Record<string, unknown>;
  } catch {
    return undefined;
  }
}

/** `ScheduleName` of a fire payload, when it is a JSON object that has one. */
function scheduleNameOf(payload: Uint8Array | undefined): unknown {
  try {
    return (JSON.parse(Buffer.from(payload ?? []).toString("utf8")) as { ScheduleName?: unknown }).ScheduleName;
  } catch {
    return undefined;
  }
}

function codeName(code: number): string {
  return code === grpc.status.OK ? "OK" : (Code[code] ?? `code ${code}`);
}

/** A fuzzer bound to one running server. Create with {@link RpcFuzzer.start}. */
export class RpcFuzzer {
  readonly stats: FuzzStats = { requests: 0, codes: {}, mutations: {}, byRpc: {}, refusalsChecked: 0, defects: [] };
  private readonly channel: grpc.Client;

  private constructor(
    private readonly server: ServerProcess,
    readonly pools: FuzzPools,
    private readonly writeCounter: WriteCounter | undefined,
  ) {
    this.channel = new grpc.Client(server.address, grpc.credentials.createInsecure(), {
      "grpc.max_receive_message_length": MAX_MESSAGE_BYTES,
      "grpc.max_send_message_length": MAX_MESSAGE_BYTES,
    });
  }

  /**
   * Populates the store with the pools' records (sessions with events,
   * schedules, fires, a lease, a pending deletion) through ordinary clients,
   * and returns a fuzzer whose pools hold the cursors and tokens handed out.
   */
  static async start(server: ServerProcess, writeCounter?: WriteCounter): Promise<RpcFuzzer> {
    const pools = initialPools();
    const sessions = grpcClient(SessionStoreService, server.address);
    const log = grpcClient(EventLogService, server.address);
    const leases = grpcClient(SessionLeaseService, server.address);
    const schedules = grpcClient(ScheduleStoreService, server.address);
    for (const id of pools.sessionIds.slice(0, 4)) {
      await sessions.save({ sessionId: id, snapshot: { format: "sessnap-json/1", payload: new TextEncoder().encode(`{"id":"${id}"}`) } });
      for (let i = 0; i < 2; i++) pools.cursors.push((await log.append({ sessionId: id, event: { format: "eventlog-json/1", payload: new TextEncoder().encode(`{"n":${i}}`) } })).cursor);
      pools.cursors.push((await log.appendGap({ sessionId: id, reason: "fuzz" })).cursor);
    }
    pools.tokens.push((await leases.acquire({ sessionId: "s-0", owner: "o-0" })).lease!.token);
    for (const [i, name] of pools.scheduleNames.slice(0, 4).entries()) {
      await schedules.saveSchedule({ name, schedule: scheduleRecord({ Name: name, PlacementOwned: i === 3 }, { NextFireAt: iso(T0 + i), Enabled: true }) });
    }
    await schedules.claimSchedule({ name: "sch-1", now: ts(T0 + 10), nextFire: ts(T0 + 60) });
    await schedules.recordFire({ fireId: "f-0", fire: fireRecord({ ID: "f-0", ScheduleName: "sch-1", SessionID: "s-1", FiredAt: iso(T0 + 10) }) });
    await schedules.recordFireStart({ name: "sch-1", fireId: "f-1", fire: fireRecord({ ID: "f-1", ScheduleName: "sch-1", SessionID: "s-1", FiredAt: iso(T0 + 10), StartedAt: iso(T0 + 11) }) });
    await schedules.recordFire({ fireId: "f-2", fire: fireRecord({ ID: "f-2", ScheduleName: "sch-0", SessionID: "s-2", FiredAt: iso(T0), Stop: "done" }) });
    await schedules.beginScheduleDelete({ name: "sch-2", deletionId: "d-0" });
    return new RpcFuzzer(server, pools, writeCounter);
  }

  /** Closes the fuzzer's channel (not the server). */
  close(): void {
    this.channel.close();
  }

  private send(method: DescMethod, bytes: Uint8Array): Promise<RawBytesOutcome> {
    const path = `/${method.parent.typeName}/${method.name}`;
    if (method.methodKind !== "server_streaming") return callWithBytes(this.channel, path, bytes);
    // Watch and follow streams may never end on their own: end them once they have answered, or gone quiet.
    const open = method.parent === Health || decode(method.input, bytes)?.follow === true;
    return callWithBytes(this.channel, path, bytes, { streaming: true, endAfter: open ? () => method.parent === Health : undefined, idleMs: open ? FOLLOW_IDLE_MS : undefined });
  }

  /** Sends a read built from `init` and returns its outcome as text: code and response bytes. */
  private async read<M extends DescMessage>(method: DescMethod & { input: M }, init: MessageInitShape<M>): Promise<string> {
    const out = await this.send(method, toBinary(method.input, create(method.input, init)));
    return `${codeName(out.code)} ${Buffer.concat(out.messages).toString("base64")}`;
  }

  /**
   * The reads that show what a write request could change, by method:
   * the session's snapshot and event log, the schedule and its fires, the
   * fire. Leases have no read RPC (the write counter covers them).
   */
  private async observe(method: DescMethod, req: Record<string, unknown>): Promise<string[]> {
    const s = SessionStoreService.method;
    const e = EventLogService.method;
    const sc = ScheduleStoreService.method;
    const out: string[] = [];
    const str = (v: unknown) => (typeof v === "string" ? v : "");
    const session = str(req.sessionId);
    const fireId = str(req.fireId);
    // RecordFire names its schedule only inside the payload.
    const fire = req.fire as { payload?: Uint8Array } | undefined;
    const names = [str(req.name), str(scheduleNameOf(fire?.payload))].filter((n) => n !== "");
    switch (method.parent) {
      case SessionStoreService:
        out.push(await this.read(s.load, { sessionId: session }));
        out.push(await this.read(e.readAfter, { sessionId: session }));
        break;
      case EventLogService:
        out.push(await this.read(e.readAfter, { sessionId: session }));
        break;
      case ScheduleStoreService:
      case ScheduleOneShotReArmerService:
        for (const name of names) out.push(await this.read(sc.loadSchedule, { name }), await this.read(sc.listFires, { scheduleName: name }));
        if (fireId !== "") out.push(await this.read(sc.loadFire, { fireId }));
        break;
    }
    return out;
  }

  private defect(kind: Defect["kind"], req: FuzzRequest, out: { code: number; details: string }, change?: string): Defect {
    const d: Defect = { kind, rpc: rpcName(req.method), mutation: req.mutation, code: codeName(out.code), details: out.details, requestHex: Buffer.from(req.bytes.subarray(0, 2048)).toString("hex"), change };
    this.stats.defects.push(d);
    return d;
  }

  /**
   * Sends one request and checks every rule of the module comment.
   *
   * @returns the defects it revealed (empty when none).
   */
  async check(req: FuzzRequest): Promise<Defect[]> {
    const found: Defect[] = [];
    const decoded = decode(req.method.input, req.bytes);
    const write = isWrite(req.method);
    const before = write && decoded !== undefined ? await this.observe(req.method, decoded) : undefined;
    const countBefore = await this.writeCounter?.();
    const out = await this.send(req.method, req.bytes);
    const countAfter = await this.writeCounter?.();
    this.stats.requests++;
    const name = out.cancelledByClient ? "CANCELLED (ended by the fuzzer)" : codeName(out.code);
    this.stats.codes[name] = (this.stats.codes[name] ?? 0) + 1;
    this.stats.mutations[req.mutation] = (this.stats.mutations[req.mutation] ?? 0) + 1;
    const perRpc = (this.stats.byRpc[rpcName(req.method)] ??= {});
    perRpc[name] = (perRpc[name] ?? 0) + 1;
    if (this.server.proc.exitCode !== null || this.server.proc.signalCode !== null) return [this.defect("crash", req, out, `server exited (${this.server.proc.exitCode ?? this.server.proc.signalCode})`)];
    if (out.code === grpc.status.DEADLINE_EXCEEDED) found.push(this.defect("hang", req, out));
    else if (out.code !== grpc.status.OK && !out.cancelledByClient && !definedCodes(req.method).has(out.code as number as Code)) found.push(this.defect("undefined-code", req, out));
    else if (out.code === grpc.status.INVALID_ARGUMENT && !namesField(req.method, out.details, req.field)) found.push(this.defect("unnamed-field", req, out));
    if (out.code === grpc.status.OK && write) this.learn(req.method, out);
    const refused = out.code !== grpc.status.OK && !out.cancelledByClient;
    if (countBefore !== countAfter && (!write || out.code === grpc.status.INVALID_ARGUMENT)) {
      found.push(this.defect("stored-on-refusal", req, out, `backend write counter ${countBefore} -> ${countAfter}`));
    }
    if (before !== undefined && refused) {
      this.stats.refusalsChecked++;
      const after = await this.observe(req.method, decoded!);
      const changed = after.findIndex((a, i) => a !== before[i]);
      if (changed >= 0) found.push(this.defect("stored-on-refusal", req, out, `read ${changed} changed: ${before[changed]!.slice(0, 120)} -> ${after[changed]!.slice(0, 120)}`));
    }
    return found;
  }

  /** Keeps cursors and tokens from OK answers, so later requests can use them. */
  private learn(method: DescMethod, out: RawBytesOutcome): void {
    const res = decode(method.output, out.messages[0] ?? new Uint8Array()) as { cursor?: string; lease?: { token?: bigint } } | undefined;
    if (typeof res?.cursor === "string" && res.cursor !== "" && this.pools.cursors.length < 64) this.pools.cursors.push(res.cursor);
    if (typeof res?.lease?.token === "bigint" && this.pools.tokens.length < 64) this.pools.tokens.push(res.lease.token);
  }

  /**
   * Checks that the server still answers: health Check of the overall
   * service is SERVING.
   *
   * @returns a crash defect when it does not, undefined otherwise.
   */
  async checkAlive(): Promise<Defect | undefined> {
    const out = await this.send(Health.method.check, toBinary(Health.method.check.input, create(Health.method.check.input, { service: "" })));
    const alive = this.server.proc.exitCode === null && out.code === grpc.status.OK;
    if (alive) return undefined;
    const d: Defect = { kind: "crash", rpc: "Health/Check", mutation: "none", code: codeName(out.code), details: out.details, requestHex: "" };
    this.stats.defects.push(d);
    return d;
  }
}
