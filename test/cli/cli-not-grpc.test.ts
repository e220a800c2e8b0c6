import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { createServer, type Server, type Socket } from "node:net";
import { runCli } from "../helpers/cli.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { makePki, type TestPki } from "../helpers/certs.js";

/**
 * A CLI command pointed at a port where no gRPC server listens (a Redis
 * port, an HTTP/1 server) fails with one line naming the problem, UNAVAILABLE
 * as grpc-go says it, and exit code 1; the HTTP/2 session's closing error
 * used to end the process with a Node stack trace after that line (found by a
 * fresh-eyes run; clients/transport.ts GuardedSessionManager,
 * clients/http2-errors.ts).
 */
describe("the CLI against a port that does not speak HTTP/2", () => {
  let server: Server;
  let address: string;
  const sockets = new Set<Socket>();
  beforeAll(async () => {
    // Answers whatever arrives as Redis would answer an unknown command.
    server = createServer((socket) => {
      sockets.add(socket);
      socket.on("data", () => socket.write("-ERR unknown command 'PRI', with args beginning with: \r\n"));
      socket.on("error", () => undefined);
      socket.on("close", () => sockets.delete(socket));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const a = server.address() as { port: number };
    address = `127.0.0.1:${a.port}`;
  });
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await new Promise((resolve) => server.close(resolve));
  });

  test.each([
    ["sessions list", (t: string) => ["sessions", "list", "--session-store-url", t]],
    ["events read", (t: string) => ["events", "read", "s1", "--event-log-url", t]],
    ["leases acquire", (t: string) => ["leases", "acquire", "s1", "--owner", "me", "--session-lease-url", t]],
  ])("%s: one line, UNAVAILABLE, naming HTTP/2; exit 1", async (_label, args) => {
    const out = await runCli(args(address));
    const lines = out.stderr.trim().split("\n");
    expect(lines, out.stderr).toHaveLength(1);
    // The bytes it sent back are no HTTP/2: Node's own words for that, not the silent-peer hint's.
    expect(lines[0]).toContain("Unavailable: the driver did not answer in HTTP/2 (Protocol error)");
    expect(out.code).toBe(1);
  });
});

/**
 * The CLI dialling a TLS listener in cleartext: the listener reads no TLS
 * handshake and hangs up without a word of HTTP/2. The one line names that
 * and the fix (--driver-tls-ca); it used to read "http/2 stream closed with
 * error code CANCEL" (found by a fresh-eyes run; clients/transport.ts
 * namingSilentPeer). With TLS the same commands work.
 */
describe("the CLI against a TLS listener, in cleartext", () => {
  let server: ServerProcess;
  let pki: TestPki;
  beforeAll(async () => {
    pki = makePki();
    server = await startServer(["--store", "sqlite::memory:", "--tls-cert", pki.serverCert, "--tls-key", pki.serverKey]);
  });
  afterAll(() => server?.stop());

  test.each([
    ["sessions list", (t: string) => ["sessions", "list", "--session-store-url", t]],
    ["events read", (t: string) => ["events", "read", "s1", "--event-log-url", t]],
    ["leases acquire", (t: string) => ["leases", "acquire", "s1", "--owner", "me", "--session-lease-url", t]],
  ])("%s: one line, UNAVAILABLE, naming HTTP/2 and --driver-tls-ca; exit 1", async (_label, args) => {
    const out = await runCli(args(server.address));
    const lines = out.stderr.trim().split("\n");
    expect(lines, out.stderr).toHaveLength(1);
    expect(lines[0]).toContain("Unavailable: the driver did not answer in HTTP/2 (the connection closed before the driver sent any HTTP/2 frame)");
    expect(lines[0]).toContain("give --driver-tls-ca");
    expect(out.code).toBe(1);
  });

  test("with --driver-tls and its CA the same command works", async () => {
    const out = await runCli(["sessions", "list", "--session-store-url", server.address, "--driver-tls", "--driver-tls-ca", pki.caCert]);
    expect(out.code, out.stderr).toBe(0);
  });
});

/**
 * `stats` against a Redis that accepts the connection and never answers
 * (stopped with SIGSTOP, or another program) fails within its time limit
 * (services/storage/store-meter.ts METER_STORE_TIMEOUT_MS, 10 s) with one
 * line and exit code 2; it used to wait forever (found by a fresh-eyes run).
 */
describe("stats against a Redis that never answers", () => {
  let silent: Server;
  const held = new Set<Socket>();
  beforeAll(async () => {
    silent = createServer((socket) => {
      held.add(socket);
      socket.on("error", () => undefined);
    });
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
  });
  afterAll(async () => {
    for (const s of held) s.destroy();
    await new Promise((resolve) => silent.close(resolve));
  });

  test("fails with one line naming the silence, exit 2, within its 10 s limit", async () => {
    const { port } = silent.address() as { port: number };
    const started = Date.now();
    const out = await runCli(["stats", "--store", `redis://127.0.0.1:${port}`], { timeoutMs: 40_000 });
    expect(out.code, out.stderr).toBe(2);
    expect(out.stderr.trim().split("\n")).toHaveLength(1);
    expect(out.stderr).toContain(`cannot reach Redis at 127.0.0.1:${port}: Socket timeout`);
    expect(Date.now() - started).toBeLessThan(40_000);
  }, 60_000);
});
