import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Code } from "@connectrpc/connect";
import * as grpc from "@grpc/grpc-js";
import { create, toBinary } from "@bufbuild/protobuf";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { SessionLeaseService } from "../../gen/mecatl/driver/v1/session_lease_pb.js";
import { EventLogService } from "../../gen/mecatl/driver/v1/event_log_pb.js";
import { conformanceBackends, type TestBackend } from "../helpers/backends.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { grpcClient } from "../helpers/clients.js";
import { callWithBytes } from "../helpers/raw-grpc.js";
import { expectCode } from "../helpers/errors.js";
import { sessnap } from "../helpers/sessnap.js";
import { readAfterAll } from "../helpers/event-log.js";

/** U+FEFF, the byte order mark: an ordinary code point inside a protobuf string. */
const BOM = "\ufeff";

/**
 * Strings are stored and answered as sent (wire-contract.md section 1: a
 * protobuf string is any valid UTF-8; Go's runtime keeps every code point). A
 * decoder that dropped a leading U+FEFF made "\ufeffx" and "x" one session,
 * one lease owner and one event log.
 */
describe.each(conformanceBackends())("strings taken verbatim on $name", (backend: TestBackend) => {
  let server: ServerProcess;
  beforeAll(async () => {
    const setup = await backend.setup();
    server = await startServer(["session-store", "session-lease", "event-log", "--store", setup.store, ...setup.args]);
  });
  afterAll(async () => {
    await server?.stop();
    await backend.teardown();
  });

  test("a session id with a leading U+FEFF is its own session: Save, Load, List and Delete keep the two apart", async () => {
    const store = grpcClient(SessionStoreService, server.address);
    const format = "sessnap-json/1";
    await store.save({ sessionId: `${BOM}s1`, snapshot: { format, payload: sessnap({ id: `${BOM}s1`, title: "with" }) } });
    await store.save({ sessionId: "s1", snapshot: { format, payload: sessnap({ id: "s1", title: "without" }) } });
    const loaded = async (id: string) => JSON.parse(Buffer.from((await store.load({ sessionId: id })).snapshot!.payload).toString("utf8")) as { id: string };
    expect((await loaded(`${BOM}s1`)).id).toBe(`${BOM}s1`);
    expect((await loaded("s1")).id).toBe("s1");
    const ids = (await store.list({})).sessions.map((s) => s.sessionId);
    expect(ids.filter((id) => id.endsWith("s1")).sort()).toEqual(["s1", `${BOM}s1`].sort());
    await store.delete({ sessionId: "s1" });
    expect((await loaded(`${BOM}s1`)).id).toBe(`${BOM}s1`);
    await expectCode(store.load({ sessionId: "s1" }), Code.NotFound);
  });

  test("owners that differ by a leading U+FEFF are two owners: the second Acquire of a held lease is refused", async () => {
    const leases = grpcClient(SessionLeaseService, server.address);
    const first = (await leases.acquire({ sessionId: "l1", owner: `${BOM}owner` })).lease!;
    expect(first.owner).toBe(`${BOM}owner`);
    await expectCode(leases.acquire({ sessionId: "l1", owner: "owner" }), Code.FailedPrecondition);
    const other = (await leases.acquire({ sessionId: `${BOM}l1`, owner: "owner" })).lease!;
    expect(other.sessionId).toBe(`${BOM}l1`);
  });

  test("event logs of ids that differ by a leading U+FEFF are two logs", async () => {
    const log = grpcClient(EventLogService, server.address);
    const event = { format: "eventlog-json/1", payload: Buffer.from('{"type":"message"}') };
    await log.append({ sessionId: `${BOM}e1`, event });
    await log.append({ sessionId: `${BOM}e1`, event });
    await log.append({ sessionId: "e1", event });
    const count = async (sessionId: string) => (await readAfterAll(log, { sessionId })).length;
    expect([await count(`${BOM}e1`), await count("e1")]).toEqual([2, 1]);
  });

  test("a request's bytes decode to the string sent: raw protobuf with EF BB BF at the start of session_id", async () => {
    // Encoded by hand-picked bytes, not by a client that might drop the mark on its side.
    const request = toBinary(SessionStoreService.method.save.input, create(SessionStoreService.method.save.input, { sessionId: `${BOM}raw`, snapshot: { format: "sessnap-json/1", payload: sessnap({ id: `${BOM}raw` }) } }));
    expect(Array.from(request.subarray(2, 5))).toEqual([0xef, 0xbb, 0xbf]);
    const client = new grpc.Client(server.address, grpc.credentials.createInsecure());
    try {
      const out = await callWithBytes(client, `/${SessionStoreService.typeName}/${SessionStoreService.method.save.name}`, request);
      expect(out.code, out.details).toBe(grpc.status.OK);
    } finally {
      client.close();
    }
    const store = grpcClient(SessionStoreService, server.address);
    await expectCode(store.load({ sessionId: "raw" }), Code.NotFound);
    expect((await store.load({ sessionId: `${BOM}raw` })).snapshot?.format).toBe("sessnap-json/1");
  });
});
