import { afterEach, describe, expect, test } from "vitest";
import { Code, ConnectError } from "@connectrpc/connect";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { EventLogService } from "../../gen/mecatl/driver/v1/event_log_pb.js";
import { SessionLeaseService } from "../../gen/mecatl/driver/v1/session_lease_pb.js";
import { ScheduleStoreService } from "../../gen/mecatl/driver/v1/schedule_store_pb.js";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { startStubServer, stub, type StubServer, type StubService } from "../helpers/stub-server.js";
import { DriverConnections } from "../../clients/transport.js";
import { SessionStoreClient } from "../../clients/session-store-client.js";
import { EventLogClient } from "../../clients/event-log-client.js";
import { SessionLeaseClient } from "../../clients/session-lease-client.js";
import { ScheduleStoreClient } from "../../clients/schedule-store-client.js";
import {
  ActiveFireError,
  ContractMismatchError,
  CursorExpiredError,
  CursorMalformedError,
  DeletionPendingError,
  FireNotFoundError,
  InfrastructureError,
  InvalidDriverResponseError,
  ScheduleNotFoundError,
  UnsupportedError,
} from "../../clients/errors.js";
import { InvalidRequestError } from "../../clients/errors.js";

/*
 * The real server never misbehaves, so these tests play a misbehaving driver
 * with an in-process stub to check the client's guards (wire-contract.md
 * sections 2.4, 2.3, 3.5 to 3.7, 5.3 and 5.6, as the harness's own tests in
 * 8.7, 8.11 and 8.14 do).
 */

const enc = (v: unknown) => new TextEncoder().encode(typeof v === "string" ? v : JSON.stringify(v));
const FULL_CAPS = { contract: "session-store/1", list: true, delete: true, create: true, metadataPaging: true, lineage: true, activityProjection: true };

let stubServer: StubServer | undefined;
let connections: DriverConnections | undefined;

async function serve(...services: StubService[]) {
  stubServer = await startStubServer(services);
  connections = new DriverConnections();
  return { server: stubServer, transport: connections.transport(stubServer.address) };
}

afterEach(async () => {
  connections?.close();
  await stubServer?.close();
  stubServer = undefined;
});

function withReason(message: string, code: Code, reason: string, domain: string) {
  return new ConnectError(message, code, undefined, [{ desc: ErrorInfoSchema, value: { reason, domain } }]);
}

describe("session store capability negotiation fails closed (2.4, 8.7)", () => {
  test("a different contract is refused and no other RPC is sent", async () => {
    const { server, transport } = await serve(stub(SessionStoreService, { capabilities: () => ({ ...FULL_CAPS, contract: "session-store/other" }) }));
    await expect(SessionStoreClient.connect(transport)).rejects.toBeInstanceOf(ContractMismatchError);
    expect(server.calls).toEqual(["SessionStoreService/Capabilities"]);
  });

  test("an empty response is refused", async () => {
    const { transport } = await serve(stub(SessionStoreService, { capabilities: () => ({}) }));
    await expect(SessionStoreClient.connect(transport)).rejects.toBeInstanceOf(ContractMismatchError);
  });

  test("UNIMPLEMENTED Capabilities is refused (no legacy fallback)", async () => {
    const { transport } = await serve(stub(SessionStoreService, {}));
    await expect(SessionStoreClient.connect(transport)).rejects.toBeInstanceOf(UnsupportedError);
  });

  test("an UNAVAILABLE probe fails construction with that code", async () => {
    const { transport } = await serve(
      stub(SessionStoreService, {
        capabilities: () => {
          throw new ConnectError("down", Code.Unavailable);
        },
      }),
    );
    const err = await SessionStoreClient.connect(transport).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InfrastructureError);
    expect((err as InfrastructureError).code).toBe(Code.Unavailable);
  });

  test("a probe that never answers fails with DEADLINE_EXCEEDED at the probe deadline", async () => {
    const { transport } = await serve(stub(SessionStoreService, { capabilities: (_req, ctx) => new Promise((_, reject) => ctx.signal.addEventListener("abort", () => reject(ctx.signal.reason))) }));
    const err = await SessionStoreClient.connect(transport, { probeTimeoutMs: 300 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InfrastructureError);
    expect((err as InfrastructureError).code).toBe(Code.DeadlineExceeded);
  });

  test("capabilities negotiated false are refused locally without an RPC", async () => {
    const { server, transport } = await serve(stub(SessionStoreService, { capabilities: () => ({ contract: "session-store/1" }) }));
    const client = await SessionStoreClient.connect(transport);
    for (const p of [
      client.list(),
      client.delete("x"),
      client.create("x", enc({ id: "x" })),
      client.pageMetadata({ limit: 1 }),
      client.readLineage({ rootSessionId: "r", rootIncarnation: "i", limit: 1 }),
    ]) {
      await expect(p).rejects.toBeInstanceOf(UnsupportedError);
    }
    expect(server.calls).toEqual(["SessionStoreService/Capabilities"]);
  });

  test("activity_state is sent only when activity projection was negotiated", async () => {
    const seen: string[] = [];
    const impl = (caps: object) => stub(SessionStoreService, { capabilities: () => caps, save: (req) => (seen.push(req.activityState), {}) });
    let { transport } = await serve(impl({ contract: "session-store/1" }));
    await (await SessionStoreClient.connect(transport)).save("a", enc({ id: "a" }), { activityState: "draft" });
    connections!.close();
    await stubServer!.close();
    ({ transport } = await serve(impl(FULL_CAPS)));
    await (await SessionStoreClient.connect(transport)).save("a", enc({ id: "a" }), { activityState: "draft" });
    expect(seen).toEqual(["", "draft"]);
  });
});

describe("session store Load guards (2.3, 8.7)", () => {
  async function loadWith(load: () => object) {
    const { transport } = await serve(stub(SessionStoreService, { capabilities: () => FULL_CAPS, load }));
    return (await SessionStoreClient.connect(transport)).load("s1").catch((e: unknown) => e);
  }

  test("an unknown format is an infrastructure error naming it, never not-found", async () => {
    const err = await loadWith(() => ({ snapshot: { format: "sessnap-json/99", payload: enc({ id: "s1" }) } }));
    expect(err).toBeInstanceOf(InvalidDriverResponseError);
    expect((err as Error).message).toContain("sessnap-json/99");
  });

  test("a payload that is not JSON is rejected", async () => {
    expect(await loadWith(() => ({ snapshot: { format: "sessnap-json/1", payload: enc("not-json") } }))).toBeInstanceOf(InvalidDriverResponseError);
  });

  test("a snapshot of another session id is rejected (mis-keyed driver)", async () => {
    const err = await loadWith(() => ({ snapshot: { format: "sessnap-json/1", payload: enc({ id: "someone-else" }) } }));
    expect(err).toBeInstanceOf(InvalidDriverResponseError);
    expect((err as Error).message).toContain("someone-else");
  });

  test("UNAVAILABLE on Load is an infrastructure error with that code", async () => {
    const err = await loadWith(() => {
      throw new ConnectError("down", Code.Unavailable);
    });
    expect(err).toBeInstanceOf(InfrastructureError);
    expect(err).not.toBeInstanceOf(InvalidDriverResponseError);
    expect((err as InfrastructureError).code).toBe(Code.Unavailable);
  });

  test("Delete treats NOT_FOUND as success", async () => {
    const { transport } = await serve(
      stub(SessionStoreService, {
        capabilities: () => FULL_CAPS,
        delete: () => {
          throw new ConnectError("gone", Code.NotFound);
        },
      }),
    );
    await expect((await SessionStoreClient.connect(transport)).delete("x")).resolves.toBeUndefined();
  });

  test("a caller's deadline on a call that never answers surfaces as TimeoutError", async () => {
    const { transport } = await serve(stub(SessionStoreService, { capabilities: () => FULL_CAPS, load: (_r, ctx) => new Promise((_, rej) => ctx.signal.addEventListener("abort", () => rej(ctx.signal.reason))) }));
    const err = await (await SessionStoreClient.connect(transport)).load("s1", { timeoutMs: 200 }).catch((e: unknown) => e);
    expect((err as Error).name).toBe("TimeoutError");
  });

  test("aborting a call in flight rejects with the abort reason", async () => {
    let arrived!: () => void;
    const inFlight = new Promise<void>((r) => (arrived = r));
    const load = (_r: unknown, ctx: { signal: AbortSignal }) => {
      arrived();
      return new Promise<never>((_, rej) => ctx.signal.addEventListener("abort", () => rej(ctx.signal.reason)));
    };
    const { transport } = await serve(stub(SessionStoreService, { capabilities: () => FULL_CAPS, load }));
    const client = await SessionStoreClient.connect(transport);
    const ac = new AbortController();
    const pending = client.load("s1", { signal: ac.signal }).catch((e: unknown) => e);
    // The stub's handler is running: the call is in flight.
    await inFlight;
    ac.abort();
    expect(((await pending) as Error).name).toBe("AbortError");
  });
});

describe("session store PageMetadata checks (2.5, 8.7)", () => {
  const ts = (s: number) => ({ seconds: BigInt(s), nanos: 0 });
  const row = (id: string, s: number) => ({ sessionId: id, modifiedAt: ts(s) });

  async function client(page: object) {
    const { transport } = await serve(stub(SessionStoreService, { capabilities: () => FULL_CAPS, pageMetadata: () => page }));
    return SessionStoreClient.connect(transport);
  }

  test("a bound next cursor is accepted verbatim", async () => {
    const c = await client({ sessions: [row("a", 20), row("b", 10)], totalCount: 3, nextCursor: { modifiedAt: ts(10), sessionId: "b", generation: "g", scope: "all", continuation: "k" } });
    const page = await c.pageMetadata({ limit: 2 });
    expect(page.nextCursor).toEqual({ modifiedAt: 10_000_000_000n, sessionId: "b", generation: "g", scope: "all", continuation: "k" });
  });

  test("an unbound next cursor is rejected", async () => {
    const c = await client({ sessions: [row("a", 20)], totalCount: 2, nextCursor: { modifiedAt: ts(20), sessionId: "a" } });
    await expect(c.pageMetadata({ limit: 1 })).rejects.toBeInstanceOf(InvalidDriverResponseError);
  });

  test("rows out of order or over the limit are rejected", async () => {
    const c = await client({ sessions: [row("a", 10), row("b", 20)], totalCount: 2 });
    await expect(c.pageMetadata({ limit: 5 })).rejects.toBeInstanceOf(InvalidDriverResponseError);
    await expect(c.pageMetadata({ limit: 1 })).rejects.toBeInstanceOf(InvalidDriverResponseError);
  });

  test("a request cursor missing a binding string is refused before the wire", async () => {
    const c = await client({});
    await expect(c.pageMetadata({ limit: 1, cursor: { modifiedAt: 1n, sessionId: "a", generation: "g", scope: "", continuation: "k" } })).rejects.toBeInstanceOf(InvalidRequestError);
    expect(stubServer!.calls).toEqual(["SessionStoreService/Capabilities"]);
  });

  test("an owner-enforced page with a row of another owner, or an ownerless one, is rejected", async () => {
    const owner = { issuer: "i", subject: "alice" };
    const mine = { ...row("a", 20), hasOwner: true, ownerIssuer: "i", ownerSubject: "alice" };
    for (const other of [{ ...row("b", 10), hasOwner: true, ownerIssuer: "i", ownerSubject: "bob" }, row("b", 10)]) {
      const c = await client({ sessions: [mine, other], totalCount: 2 });
      await expect(c.pageMetadata({ limit: 2, owner, ownershipEnforced: true })).rejects.toBeInstanceOf(InvalidDriverResponseError);
      expect((await c.pageMetadata({ limit: 2 })).sessions).toHaveLength(2);
      connections!.close();
      await stubServer!.close();
    }
  });

  test("an invalid timestamp on a row is rejected; an activity other than draft or active reads as unknown", async () => {
    let c = await client({ sessions: [{ sessionId: "a", modifiedAt: { seconds: 1n, nanos: 1_000_000_000 } }], totalCount: 1 });
    await expect(c.pageMetadata({ limit: 1 })).rejects.toBeInstanceOf(InvalidDriverResponseError);
    connections!.close();
    await stubServer!.close();
    c = await client({ sessions: [{ ...row("a", 30), activityState: "draft" }, { ...row("b", 20), activityState: "not-an-activity" }, { ...row("c", 10), activityState: "active" }], totalCount: 3 });
    expect((await c.pageMetadata({ limit: 3 })).sessions.map((r) => r.activityState)).toEqual(["draft", "", "active"]);
  });
});

describe("session store ReadLineage checks (2.5, 8.6)", () => {
  const ROOT = "inc_aaaqeayeaudaocajbifqydiob4";
  const OTHER = "inc_baaqeayeaudaocajbifqydiob4";
  const scope = new Uint8Array(32);
  const record = (id: string, extra: object = {}) => ({ sessionId: id, incarnation: ROOT, kind: "main", state: "retained", ownerScope: scope, ...extra });
  const child = (id: string, extra: object = {}) => record(id, { incarnation: OTHER, kind: "subagent", parentSessionId: "root", parentIncarnation: ROOT, callId: "c", ...extra });
  const pruned = { state: "pruned", deletedAt: { seconds: 5n, nanos: 0 } };

  async function read(records: object[], truncated = false) {
    const { transport } = await serve(stub(SessionStoreService, { capabilities: () => FULL_CAPS, readLineage: () => ({ records, truncated }) }));
    return (await SessionStoreClient.connect(transport)).readLineage({ rootSessionId: "root", rootIncarnation: ROOT, limit: 10 });
  }

  test("a well-formed answer is accepted", async () => {
    const r = await read([record("root"), record("root", { incarnation: OTHER, ...pruned }), child("a"), child("a", { incarnation: ROOT, ...pruned })]);
    expect(r.records.map((x) => x.sessionId)).toEqual(["root", "root", "a", "a"]);
  });

  test.each([
    ["records out of order", [child("a"), record("root")]],
    ["a pruned record before a retained one of the same id", [record("root", pruned), record("root", { incarnation: OTHER })]],
    ["a record not directly related to the root incarnation", [record("root"), child("a", { parentIncarnation: OTHER })]],
    ["an invalid incarnation", [record("root", { incarnation: "inc_x" })]],
    ["a kind whose relationship fails the harness's validation", [record("root"), child("a", { callId: "" })]],
    ["an unknown kind", [record("root", { kind: "sidekick" })]],
    ["an owner scope that is not 32 bytes", [record("root", { ownerScope: new Uint8Array(31) })]],
    ["a pruned record without deleted_at", [record("root", { state: "pruned" })]],
  ])("%s is rejected", async (_label, records) => {
    await expect(read(records)).rejects.toBeInstanceOf(InvalidDriverResponseError);
  });

  test("an invalid root or record incarnation is refused before the wire", async () => {
    const { server, transport } = await serve(stub(SessionStoreService, { capabilities: () => FULL_CAPS }));
    const c = await SessionStoreClient.connect(transport);
    await expect(c.readLineage({ rootSessionId: "r", rootIncarnation: "i", limit: 1 })).rejects.toBeInstanceOf(InvalidRequestError);
    await expect(c.readLineage({ rootSessionId: "r", rootIncarnation: ROOT, limit: 1, record: { sessionId: "c", incarnation: "legacy_1" } })).rejects.toBeInstanceOf(InvalidRequestError);
    expect(server.calls).toEqual(["SessionStoreService/Capabilities"]);
  });
});

describe("event log stream guards (3.5 to 3.7, 8.11)", () => {
  const event = (n: number) => ({ format: "eventlog-json/1", payload: enc({ n }) });

  test("a mid-stream fault yields the events before it, then one error, then nothing", async () => {
    const { transport } = await serve(
      stub(EventLogService, {
        async *read() {
          yield { event: event(1) };
          yield { event: event(2) };
          throw new ConnectError("disk on fire", Code.Internal);
        },
      }),
    );
    const seen: number[] = [];
    let error: unknown;
    try {
      for await (const p of new EventLogClient(transport).read("s")) seen.push(JSON.parse(new TextDecoder().decode(p)).n);
    } catch (err) {
      error = err;
    }
    expect(seen).toEqual([1, 2]);
    expect(error).toBeInstanceOf(InfrastructureError);
    expect((error as InfrastructureError).code).toBe(Code.Internal);
  });

  async function firstError(records: object[]) {
    const { transport } = await serve(
      stub(EventLogService, {
        async *readAfter() {
          yield* records;
        },
      }),
    );
    try {
      for await (const _ of new EventLogClient(transport).readAfter("s")) void _;
    } catch (err) {
      return err;
    }
    return undefined;
  }

  test("an unknown event format stops the stream with an error naming the tag", async () => {
    const err = await firstError([{ kind: "event", event: { format: "eventlog-json/99", payload: enc({}) }, cursor: "c1" }]);
    expect(err).toBeInstanceOf(InvalidDriverResponseError);
    expect((err as Error).message).toContain("eventlog-json/99");
  });

  test("a payload that is not JSON is a decode error", async () => {
    const err = await firstError([{ kind: "event", event: { format: "eventlog-json/1", payload: enc("{nope") }, cursor: "c1" }]);
    expect((err as Error).message).toContain("decode event");
  });

  test("an unknown record kind is an error, never guessed", async () => {
    expect(await firstError([{ kind: "checkpoint", cursor: "c1" }])).toBeInstanceOf(InvalidDriverResponseError);
  });

  test("an empty cursor on a record is an error", async () => {
    expect(await firstError([{ kind: "gap", gapReason: "lost", cursor: "" }])).toBeInstanceOf(InvalidDriverResponseError);
  });

  test("cursor reasons are trusted only with the mecatl.stacklok.com domain", async () => {
    const fail = (e: ConnectError) =>
      stub(EventLogService, {
        async *readAfter() {
          yield* [];
          throw e;
        },
      });
    const collect = async (e: ConnectError) => {
      const { transport } = await serve(fail(e));
      try {
        for await (const _ of new EventLogClient(transport).readAfter("s", { cursor: "x" })) void _;
      } catch (err) {
        return err;
      } finally {
        connections!.close();
        await stubServer!.close();
      }
      return undefined;
    };
    expect(await collect(withReason("bad", Code.InvalidArgument, "cursor_malformed", "mecatl.stacklok.com"))).toBeInstanceOf(CursorMalformedError);
    expect(await collect(withReason("old", Code.FailedPrecondition, "cursor_expired", "mecatl.stacklok.com"))).toBeInstanceOf(CursorExpiredError);
    const foreign = await collect(withReason("bad", Code.InvalidArgument, "cursor_malformed", "example.com"));
    expect(foreign).toBeInstanceOf(InfrastructureError);
    expect(foreign).not.toBeInstanceOf(CursorMalformedError);
    const bare = await collect(new ConnectError("bad", Code.InvalidArgument));
    expect(bare).not.toBeInstanceOf(CursorMalformedError);
  });

  test("UNIMPLEMENTED ReadAfter is 'cursor unsupported'", async () => {
    expect(await firstError([])).toBeUndefined();
    connections!.close();
    await stubServer!.close();
    const { transport } = await serve(stub(EventLogService, {}));
    const err = await (async () => {
      try {
        for await (const _ of new EventLogClient(transport).readAfter("s")) void _;
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(UnsupportedError);
  });

  test("aborting a follow ends the iteration cleanly, with no error", async () => {
    const { transport } = await serve(
      stub(EventLogService, {
        async *readAfter(_req, ctx) {
          yield { kind: "event", event: event(1), cursor: "c1" };
          await new Promise((resolve) => ctx.signal.addEventListener("abort", resolve));
          throw new ConnectError("cancelled", Code.Canceled);
        },
      }),
    );
    const ac = new AbortController();
    const cursors: string[] = [];
    for await (const r of new EventLogClient(transport).readAfter("s", { follow: true, signal: ac.signal })) {
      cursors.push(r.cursor);
      ac.abort();
    }
    expect(cursors).toEqual(["c1"]);
  });
});

describe("session lease and schedule store status mapping (4.3, 5.3, 5.6, 8.14)", () => {
  test("UNIMPLEMENTED lease RPCs are lease-unsupported", async () => {
    const { transport } = await serve(stub(SessionLeaseService, {}));
    await expect(new SessionLeaseClient(transport).acquire("s", "o")).rejects.toBeInstanceOf(UnsupportedError);
  });

  test("a granted lease for another session is an invalid response", async () => {
    const { transport } = await serve(stub(SessionLeaseService, { acquire: () => ({ lease: { sessionId: "other", owner: "o", token: 1n, expiry: { seconds: 1n } } }) }));
    await expect(new SessionLeaseClient(transport).acquire("s", "o")).rejects.toBeInstanceOf(InvalidDriverResponseError);
  });

  const schedule = (name: string, owned = false) => ({ Spec: { Name: name, PlacementOwned: owned }, State: { Enabled: true } });

  test("a schedule of another name is an infrastructure error naming it, never not-found", async () => {
    const { transport } = await serve(stub(ScheduleStoreService, { loadSchedule: () => ({ schedule: { format: "schedule-json/1", payload: enc(schedule("DIFFERENT")) } }) }));
    const err = await new ScheduleStoreClient(transport).loadSchedule("mine").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidDriverResponseError);
    expect((err as Error).message).toContain("DIFFERENT");
  });

  test("an unknown schedule format, or a tag that disagrees with PlacementOwned, is rejected", async () => {
    const answers = [
      { format: "schedule-json/99", payload: enc(schedule("a")) },
      { format: "schedule-json/1", payload: enc(schedule("a", true)) },
      { format: "schedule-json/2-owned-placement", payload: enc(schedule("a", false)) },
    ];
    const { transport } = await serve(stub(ScheduleStoreService, { listSchedules: () => ({ schedules: [answers.shift()!] }) }));
    const client = new ScheduleStoreClient(transport);
    for (let i = 0; i < 3; i++) await expect(client.listSchedules()).rejects.toBeInstanceOf(InvalidDriverResponseError);
  });

  test("an owned schedule is sent with the owned-placement tag", async () => {
    const formats: string[] = [];
    const { transport } = await serve(stub(ScheduleStoreService, { saveSchedule: (req) => (formats.push(req.schedule!.format), {}) }));
    const client = new ScheduleStoreClient(transport);
    await client.saveSchedule(schedule("a", true));
    await client.saveSchedule(schedule("b", false));
    expect(formats).toEqual(["schedule-json/2-owned-placement", "schedule-json/1"]);
  });

  test("LoadFire of another id, or in another format, is rejected; NOT_FOUND is FireNotFoundError", async () => {
    const answers: Array<() => object> = [
      () => ({ fire: { format: "schedule-json/1", payload: enc({ ID: "other" }) } }),
      () => ({ fire: { format: "schedule-json/9", payload: enc({ ID: "f1" }) } }),
      () => {
        throw new ConnectError("no fire", Code.NotFound);
      },
    ];
    const { transport } = await serve(stub(ScheduleStoreService, { loadFire: () => answers.shift()!() }));
    const client = new ScheduleStoreClient(transport);
    await expect(client.loadFire("f1")).rejects.toBeInstanceOf(InvalidDriverResponseError);
    await expect(client.loadFire("f1")).rejects.toBeInstanceOf(InvalidDriverResponseError);
    const err = await client.loadFire("f1").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(FireNotFoundError);
    expect(err).toBeInstanceOf(ScheduleNotFoundError);
  });

  test("ABORTED is deletion-pending, FAILED_PRECONDITION active-fire, Delete tolerates NOT_FOUND, ReArm UNIMPLEMENTED is unsupported", async () => {
    const { transport } = await serve(
      stub(ScheduleStoreService, {
        setScheduleEnabled: () => {
          throw new ConnectError("deleting", Code.Aborted);
        },
        beginScheduleDelete: () => {
          throw new ConnectError("fire running", Code.FailedPrecondition);
        },
        deleteSchedule: () => {
          throw new ConnectError("gone", Code.NotFound);
        },
      }),
    );
    const client = new ScheduleStoreClient(transport);
    await expect(client.setScheduleEnabled("a", false)).rejects.toBeInstanceOf(DeletionPendingError);
    await expect(client.beginScheduleDelete("a", "d1")).rejects.toBeInstanceOf(ActiveFireError);
    await expect(client.deleteSchedule("a")).resolves.toBeUndefined();
    await expect(client.reArmOneShot("a", new Date())).rejects.toBeInstanceOf(UnsupportedError);
  });
});
