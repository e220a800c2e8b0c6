import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { Code, ConnectError, createClient, type Interceptor, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { EventLogService } from "../../gen/mecatl/driver/v1/event_log_pb.js";
import { Health, HealthCheckResponse_ServingStatus as Status } from "../../gen/grpc/health/v1/health_pb.js";
import { startServer, waitForLog, type ServerProcess } from "../helpers/server.js";
import { MAX_MESSAGE_BYTES } from "../helpers/clients.js";
import { SESSION_MEMORY_MIB } from "../../clients/transport.js";
import { body, ev } from "../helpers/event-log.js";

/**
 * `--auth-token-file` on every kind of RPC (wire-contract.md section 6,
 * issue 15): unary, server-streaming Read and ReadAfter (with and without
 * follow) need `authorization: Bearer <token>` on the gRPC listener and on
 * the Connect listener (Connect and gRPC-Web protocols) alike; health (Check
 * and Watch) answers with any token or none. Written against the RPC outcome only, so it holds wherever the server
 * checks the token (before or after reading the request body).
 */

/** Sets the `authorization` header to `value` on every call (no header when undefined). */
function authorization(value: string | undefined): Interceptor {
  return (next) => (req) => {
    if (value !== undefined) req.header.set("authorization", value);
    return next(req);
  };
}

interface Protocol {
  name: string;
  transport(server: ServerProcess, header: string | undefined): Transport;
}

const PROTOCOLS: Protocol[] = [
  {
    name: "gRPC on --listen",
    transport: (s, h) =>
      createGrpcTransport({ baseUrl: `http://${s.address}`, readMaxBytes: MAX_MESSAGE_BYTES, writeMaxBytes: MAX_MESSAGE_BYTES, nodeOptions: { maxSessionMemory: SESSION_MEMORY_MIB }, interceptors: [authorization(h)] }),
  },
  {
    name: "Connect on --connect-listen",
    transport: (s, h) => createConnectTransport({ baseUrl: `http://${s.connectAddress}`, httpVersion: "1.1", interceptors: [authorization(h)] }),
  },
  {
    name: "gRPC-Web on --connect-listen",
    transport: (s, h) => createGrpcWebTransport({ baseUrl: `http://${s.connectAddress}`, httpVersion: "1.1", interceptors: [authorization(h)] }),
  },
];

const SEEDED_SESSION = "auth-seeded";

/**
 * One kind of RPC: `call` runs it to the end (a write keyed by `marker`),
 * pushing what it delivers into `into` as it arrives (each message of a
 * stream), so a refused call shows whatever it leaked before failing.
 */
interface RpcKind {
  name: string;
  /** True for health, which answers whatever the token. */
  open?: boolean;
  call(t: Transport, marker: string, into: unknown[]): Promise<void>;
}

async function drain<T>(stream: AsyncIterable<T>, into: unknown[], pick: (m: T) => unknown): Promise<void> {
  for await (const m of stream) into.push(pick(m));
}

const KINDS: RpcKind[] = [
  {
    name: "unary Load",
    call: async (t, _m, into) => void into.push(new TextDecoder().decode((await createClient(SessionStoreService, t).load({ sessionId: SEEDED_SESSION })).snapshot!.payload)),
  },
  {
    name: "unary Save",
    call: async (t, marker, into) => {
      await createClient(SessionStoreService, t).save({ sessionId: marker, snapshot: { format: "sessnap-json/1", payload: new Uint8Array([1]) } });
      into.push("saved");
    },
  },
  {
    name: "server-streaming Read",
    call: (t, _m, into) => drain(createClient(EventLogService, t).read({ sessionId: SEEDED_SESSION }), into, (r) => body(r.event?.payload).seq),
  },
  {
    name: "server-streaming ReadAfter",
    call: (t, _m, into) => drain(createClient(EventLogService, t).readAfter({ sessionId: SEEDED_SESSION }), into, (r) => r.kind),
  },
  {
    name: "server-streaming ReadAfter with follow",
    // limit 1 ends the follow after the one record; without a token it must not even start.
    call: (t, _m, into) => drain(createClient(EventLogService, t).readAfter({ sessionId: SEEDED_SESSION, follow: true, limit: 1 }), into, (r) => r.kind),
  },
  {
    name: "health Check",
    open: true,
    call: async (t, _m, into) => void into.push(Status[(await createClient(Health, t).check({ service: "" })).status]),
  },
  {
    name: "health Watch",
    open: true,
    call: async (t, _m, into) => {
      const abort = new AbortController();
      for await (const r of createClient(Health, t).watch({ service: "mecatl.driver.v1.EventLogService" }, { signal: abort.signal })) {
        into.push(Status[r.status]);
        break;
      }
      abort.abort();
    },
  },
];

/** What each kind delivers when the token is good. */
const EXPECTED: Record<string, unknown[]> = {
  "unary Load": ["seeded"],
  "unary Save": ["saved"],
  "server-streaming Read": [1],
  "server-streaming ReadAfter": ["event"],
  "server-streaming ReadAfter with follow": ["event"],
  "health Check": ["SERVING"],
  "health Watch": ["SERVING"],
};

const matrix = PROTOCOLS.flatMap((p) => KINDS.map((k) => ({ p, k, label: `${k.name} over ${p.name}` })));
const marker = () => `auth-save-${randomBytes(4).toString("hex")}`;

/** Runs every kind on every protocol with `header`; returns "label: OK <delivered>" or "label: <code> <delivered>". */
async function runMatrix(server: ServerProcess, header: string | undefined): Promise<string[]> {
  const out: string[] = [];
  for (const { p, k, label } of matrix) {
    const delivered: unknown[] = [];
    try {
      await k.call(p.transport(server, header), marker(), delivered);
      out.push(`${label}: OK ${JSON.stringify(delivered)}`);
    } catch (err) {
      out.push(`${label}: ${Code[ConnectError.from(err).code]} ${JSON.stringify(delivered)}`);
    }
  }
  return out;
}

/** The matrix's expected lines when every kind but health answers `code`. */
const outcome = (code: string) =>
  matrix.map(({ k, label }) => {
    const c = k.open === true ? "OK" : code;
    return `${label}: ${c} ${JSON.stringify(c === "OK" ? EXPECTED[k.name] : [])}`;
  });

describe("bearer tokens on every RPC kind and listener (--auth-token-file, wire-contract section 6)", () => {
  let server: ServerProcess;
  let tokenFile: string;
  beforeAll(async () => {
    tokenFile = join(mkdtempSync(join(tmpdir(), "mecatl-auth-")), "tokens");
    writeFileSync(tokenFile, "# operators\ntok-123\n\ntok-456\n");
    server = await startServer(["session-store", "event-log", "--store", "sqlite::memory:", "--connect-listen", "127.0.0.1:0", "--auth-token-file", tokenFile]);
    const t = PROTOCOLS[0]!.transport(server, "Bearer tok-123");
    await createClient(SessionStoreService, t).save({ sessionId: SEEDED_SESSION, snapshot: { format: "sessnap-json/1", payload: new TextEncoder().encode("seeded") } });
    await createClient(EventLogService, t).append({ sessionId: SEEDED_SESSION, event: ev({ seq: 1 }) });
  });
  afterAll(() => server?.stop());

  /** Session ids whose Save was answered, read with a good token. */
  async function savedSince(before: Set<string>): Promise<string[]> {
    const list = await createClient(SessionStoreService, PROTOCOLS[0]!.transport(server, "Bearer tok-123")).list({});
    return list.sessions.map((s) => s.sessionId).filter((id) => !before.has(id));
  }

  test.each([
    ["no authorization header", undefined],
    ["an unknown token", "Bearer tok-unknown"],
    ["a header that is not a bearer token", "Basic dG9rLTEyMzo="],
    ["a bearer header without a token", "Bearer "],
  ])("with %s every kind but health is UNAUTHENTICATED on every listener, delivering and storing nothing", async (_label, header) => {
    const before = new Set((await createClient(SessionStoreService, PROTOCOLS[0]!.transport(server, "Bearer tok-123")).list({})).sessions.map((s) => s.sessionId));
    expect(await runMatrix(server, header)).toEqual(outcome("Unauthenticated"));
    expect(await savedSince(before)).toEqual([]);
  });

  test("every listed token is accepted by every kind on every listener", async () => {
    for (const token of ["tok-123", "tok-456"]) expect(await runMatrix(server, `Bearer ${token}`)).toEqual(outcome("OK"));
  });

  test("a rewritten token file takes effect once the server logs the reload: the new token works on every kind, a removed one only on health", async () => {
    const from = server.stderr.length;
    writeFileSync(tokenFile, "tok-rotated\n");
    const reload = await waitForLog(server, "reloaded --auth-token-file", { from });
    expect(reload.entry.tokens).toBe(1);
    expect(await runMatrix(server, "Bearer tok-rotated")).toEqual(outcome("OK"));
    expect(await runMatrix(server, "Bearer tok-123")).toEqual(outcome("Unauthenticated"));
    expect(await runMatrix(server, "Bearer tok-456")).toEqual(outcome("Unauthenticated"));
  });

  test("emptying the token file revokes every token until one is written again (issue 14: fail closed)", async () => {
    writeFileSync(tokenFile, "tok-kept\n");
    await waitForLog(server, "reloaded --auth-token-file", { from: server.stderr.length });
    expect(await runMatrix(server, "Bearer tok-kept")).toEqual(outcome("OK"));
    let from = server.stderr.length;
    writeFileSync(tokenFile, "# every token revoked\n");
    const emptied = await waitForLog(server, "reloaded --auth-token-file: it holds no token, so every call but health is refused (UNAUTHENTICATED) until it holds one", { from });
    expect(emptied.entry.tokens).toBe(0);
    expect(await runMatrix(server, "Bearer tok-kept")).toEqual(outcome("Unauthenticated"));
    from = server.stderr.length;
    writeFileSync(tokenFile, "tok-back\n");
    await waitForLog(server, "reloaded --auth-token-file", { from });
    expect(await runMatrix(server, "Bearer tok-back")).toEqual(outcome("OK"));
  });
});
