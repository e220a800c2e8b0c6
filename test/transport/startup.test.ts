import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { connect, createServer, type AddressInfo, type Server } from "node:net";
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { spawnRedis } from "../helpers/redis-server.js";
import { runServeExpectingFailure, startServer, type ServerProcess } from "../helpers/server.js";
import { startFaultProxy } from "../helpers/fault-proxy.js";
import { grpcClientWithSentSignal } from "../helpers/clients.js";
import { freePort, waitFor } from "../helpers/wait.js";

/** Whether a TCP connection to 127.0.0.1:`port` is accepted (then closed at once). */
function tcpAccepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, "127.0.0.1");
    s.once("connect", () => (s.destroy(), resolve(true)));
    s.once("error", () => resolve(false));
  });
}

function oneLine(stderr: string): string {
  const lines = stderr.trim().split("\n");
  expect(lines).toHaveLength(1);
  return lines[0]!;
}

describe("startup problems end with one line that says what to do, and a non-zero exit", () => {
  test("a Redis without appendfsync always is refused, naming the fix", async () => {
    const redis = await spawnRedis({ durable: false });
    try {
      const { code, stderr } = await runServeExpectingFailure(["--listen", "127.0.0.1:0", "--store", redis.url]);
      expect(code).not.toBe(0);
      const line = oneLine(stderr);
      expect(line).toContain("appendfsync always");
      expect(line).toContain("--redis-durability=relaxed");
      const relaxed = await startServer(["--store", redis.url, "--redis-durability", "relaxed"]);
      expect(relaxed.stderr.join("\n")).toContain("NOT durable");
      await relaxed.stop();
    } finally {
      await redis.stop();
    }
  });

  test.each([
    ["an unreachable Redis", async () => ["--store", `redis://127.0.0.1:${await freePort()}`], "cannot reach Redis"],
    ["an unknown store scheme", async () => ["--store", "postgres://localhost/db"], "sqlite:PATH"],
    ["credentials in the Redis URL", async () => ["--store", "redis://user:secret@127.0.0.1:6379"], "--redis-password-file"],
    ["cleartext Redis to a remote host", async () => ["--store", "redis://10.1.2.3:6379"], "--redis-allow-plaintext"],
    ["an unknown service", async () => ["nonsense"], "unknown service"],
    ["cleartext on a non-loopback address", async () => ["--listen", "0.0.0.0:0"], "--insecure-listen"],
    ["a missing TLS certificate", async () => ["--tls-cert", "/nonexistent/cert.pem", "--tls-key", "/nonexistent/key.pem"], "--tls-cert"],
    ["a key without a certificate", async () => ["--tls-key", "/nonexistent/key.pem"], "--tls-cert and --tls-key"],
    ["a missing token file", async () => ["--auth-token-file", "/nonexistent/tokens"], "--auth-token-file"],
    ["a malformed listen address", async () => ["--listen", "nowhere"], "--listen"],
    ["an unwritable SQLite path", async () => ["--store", "sqlite:/etc/hostname/db.sqlite"], "--store"],
  ])("%s", async (_label, args, expected) => {
    const { code, stderr } = await runServeExpectingFailure(["--listen", "127.0.0.1:0", "--store", "sqlite::memory:", ...(await args())]);
    expect(code).not.toBe(0);
    expect(oneLine(stderr)).toContain(expected);
  });

  describe("a busy listen address fails the start before the store creates anything (issue 14)", () => {
    let dir: string;
    let taken: Server;
    let port: number;
    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), "mecatl-startup-"));
      taken = createServer();
      await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
      port = (taken.address() as AddressInfo).port;
    });
    afterAll(() => {
      taken?.close();
      rmSync(dir, { recursive: true, force: true });
    });

    test.each(["--listen", "--metrics-listen", "--connect-listen", "--health-listen"])("%s on a port in use: status 2, one line, no database file or directory", async (flag) => {
      const store = join(dir, flag.slice(2), "store.sqlite");
      const others = ["--listen", "127.0.0.1:0", ...(flag === "--listen" ? [] : [flag, `127.0.0.1:${port}`])];
      const args = flag === "--listen" ? ["--listen", `127.0.0.1:${port}`, "--metrics-listen", "127.0.0.1:0", "--connect-listen", "127.0.0.1:0", "--health-listen", "127.0.0.1:0"] : others;
      const { code, stderr } = await runServeExpectingFailure([...args, "--store", `sqlite:${store}`]);
      expect(code).toBe(2);
      expect(oneLine(stderr)).toContain(`cannot listen on ${flag} 127.0.0.1:${port}`);
      expect(oneLine(stderr)).toContain(`another process is listening there: stop it or choose another ${flag}`);
      expect(existsSync(dirname(store))).toBe(false);
    });

    test("a unix socket another process listens on: status 2, no database file", async () => {
      const socket = join(dir, "busy.sock");
      const owner = createServer();
      await new Promise<void>((resolve) => owner.listen(socket, resolve));
      try {
        for (const flag of ["--listen", "--health-listen"]) {
          const store = join(dir, `unix${flag}`, "store.sqlite");
          const args = flag === "--listen" ? ["--listen", `unix:${socket}`] : ["--listen", "127.0.0.1:0", flag, `unix:${socket}`];
          const { code, stderr } = await runServeExpectingFailure([...args, "--store", `sqlite:${store}`]);
          expect(code).toBe(2);
          expect(oneLine(stderr)).toContain(`${flag} ${socket}: another process is listening on this socket`);
          expect(existsSync(dirname(store))).toBe(false);
        }
      } finally {
        owner.close();
      }
    });

    test("a unix socket in a directory that does not exist: status 2, one line naming the directory, not ports", async () => {
      const missing = join(dir, "no-such-dir");
      const { code, stderr } = await runServeExpectingFailure(["--listen", `unix:${join(missing, "x.sock")}`, "--store", "sqlite::memory:"]);
      expect(code).toBe(2);
      expect(oneLine(stderr)).toContain(`its directory ${missing} does not exist: create it, or choose another --listen`);
      expect(oneLine(stderr)).not.toContain("choose a port");
    });

    test("a store that fails after the listeners are bound leaves no socket file behind", async () => {
      const socket = join(dir, "mine.sock");
      const { code, stderr } = await runServeExpectingFailure(["--listen", `unix:${socket}`, "--store", `redis://127.0.0.1:${await freePort()}`]);
      expect(code).toBe(2);
      expect(oneLine(stderr)).toContain("cannot reach Redis");
      expect(existsSync(socket)).toBe(false);
    });
  });

  test("a call made while the store is still opening waits for it and is served", async () => {
    const redis = await spawnRedis();
    const proxy = await startFaultProxy(redis.port);
    proxy.delayMs = 1_000;
    proxy.setMode("delay");
    const port = await freePort();
    const starting = startServer(["session-store", "--store", `redis://${proxy.address}`, "--store-timeout", "60s"], { listen: `127.0.0.1:${port}` });
    starting.catch(() => undefined);
    let server: ServerProcess | undefined;
    const { client, sent } = grpcClientWithSentSignal(SessionStoreService, `127.0.0.1:${port}`);
    try {
      // The listener is bound while Redis (each of its answers held a second) is still being opened...
      await waitFor(() => tcpAccepts(port), 20_000, "the gRPC listener to accept connections");
      const call = client.capabilities({});
      await sent("Capabilities");
      // ...and the call, sent while it is, is held (not answered UNIMPLEMENTED) until the services are mounted.
      proxy.setMode("pass");
      expect((await call).contract).toBe("session-store/1");
      server = await starting;
    } finally {
      await (server ?? (await starting.catch(() => undefined)))?.stop();
      await proxy.close();
      await redis.stop();
    }
  });

  test("a startup refusal written to a pipe is one JSON log line (level 60, exitCode 2, msg naming the flag); a flag parser's refusal too", async () => {
    for (const args of [["--store", "sqlite:/proc/self/x.sqlite"], ["--lease-ttl", "soon"], ["--no-such-flag"]]) {
      const { code, raw } = await runServeExpectingFailure(["--listen", "127.0.0.1:0", ...args]);
      expect(code).toBe(2);
      const lines = raw.trim().split("\n");
      expect(lines, raw).toHaveLength(1);
      const entry = JSON.parse(lines[0]!) as Record<string, unknown>;
      expect(entry).toMatchObject({ level: 60, exitCode: 2, service: "mecatl-drivers" });
      expect(typeof entry.time).toBe("number");
      expect(entry.msg).toContain(args[0]);
      expect(entry.msg).not.toMatch(/^error: /);
    }
  });

  test("a bad flag value is reported by the flag parser, with status 2 like every startup problem", async () => {
    const { code, stderr } = await runServeExpectingFailure(["--lease-ttl", "soon"]);
    expect(code).toBe(2);
    expect(stderr).toContain("--lease-ttl");
    const unknown = await runServeExpectingFailure(["--no-such-flag"]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("unknown option '--no-such-flag'; see mecatl-drivers serve --help");
  });

  test("a --store-timeout or --lease-ttl under 100ms is refused, naming the flag and the floor, before any file is made (1ms made the first store operation fail and the server crash)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "mecatl-short-"));
    try {
      for (const args of [["--store-timeout", "1ms"], ["--store-timeout", "99ms"], ["--lease-ttl", "1ms"]]) {
        const { code, stderr } = await runServeExpectingFailure(["--store", `sqlite:${join(dir, "store.sqlite")}`, ...args]);
        expect(code).toBe(2);
        expect(stderr).toContain(args[0]);
        expect(stderr).toContain("expected at least 100ms");
        expect(existsSync(join(dir, "store.sqlite")), "no database file").toBe(false);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("--max-connection-age and --keepalive-time below 100ms are refused, naming the flag (found by a fresh-eyes run: 0.5ms refused every call)", async () => {
    for (const args of [["--max-connection-age", "0.5ms"], ["--keepalive-time", "50ms"]]) {
      const { code, stderr } = await runServeExpectingFailure(["--store", "sqlite::memory:", ...args]);
      expect(code).toBe(2);
      expect(oneLine(stderr)).toContain(`option '${args[0]} <duration>' argument '${args[1]}' is invalid. expected at least 100ms`);
    }
  });

  test("a timer duration longer than a Node.js timer waits (2^31 - 1 ms) is refused, naming the flag; --lease-ttl, which no timer waits on, keeps its 365d bound (found by a fresh-eyes run: 30d acted as 1 ms)", async () => {
    for (const args of [["--store-timeout", "25d"], ["--max-connection-age", "30d"], ["--shutdown-grace", "30d"], ["--keepalive-time", "1y"], ["--follow-poll-interval", "25d"]]) {
      const { code, stderr } = await runServeExpectingFailure(["--store", "sqlite::memory:", ...args]);
      expect(code).toBe(2);
      expect(oneLine(stderr)).toContain(`option '${args[0]} <duration>' argument '${args[1]}' is invalid. expected at most 24d (2^31 - 1 ms`);
    }
    const server = await startServer(["--store", "sqlite::memory:", "--store-timeout", "24d", "--lease-ttl", "300d"]);
    await server.stop();
  });

  test("a --store address where something other than Redis answers is refused saying so, not as 'cannot reach' with ioredis's internals (found by a fresh-eyes run)", async () => {
    // Answers as an HTTP/2 server would: a SETTINGS frame, whatever arrives.
    const other = createServer((socket) => {
      socket.on("error", () => undefined);
      socket.on("data", () => socket.write(Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0])));
    });
    await new Promise<void>((resolve) => other.listen(0, "127.0.0.1", resolve));
    try {
      const { port } = other.address() as AddressInfo;
      const { code, stderr } = await runServeExpectingFailure(["--store", `redis://127.0.0.1:${port}`]);
      expect(code).toBe(2);
      expect(oneLine(stderr)).toContain(`the server at 127.0.0.1:${port} does not speak the Redis protocol (`);
      expect(oneLine(stderr)).not.toContain("enableOfflineQueue");
    } finally {
      other.close();
    }
  });

  test("an expired --tls-cert is refused at start, naming the file and the date (found by a fresh-eyes run: the server started and failed every handshake)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "mecatl-expired-"));
    try {
      // A self-signed certificate valid for 0 days: its notAfter is the second it was made.
      execFileSync("openssl", ["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "key.pem", "-out", "req.csr", "-subj", "/CN=expired"], { cwd: dir, stdio: "pipe" });
      execFileSync("openssl", ["x509", "-req", "-in", "req.csr", "-signkey", "key.pem", "-out", "cert.pem", "-days", "0"], { cwd: dir, stdio: "pipe" });
      await new Promise((resolve) => setTimeout(resolve, 1100));
      const { code, stderr } = await runServeExpectingFailure(["--store", "sqlite::memory:", "--tls-cert", join(dir, "cert.pem"), "--tls-key", join(dir, "key.pem")]);
      expect(code).toBe(2);
      expect(oneLine(stderr)).toContain(`--tls-cert ${join(dir, "cert.pem")}: the certificate expired on `);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("a memory budget too small for ordinary calls is refused, naming --max-inflight-bytes and the floor", async () => {
    for (const value of ["1KB", "1023KB"]) {
      const { code, stderr } = await runServeExpectingFailure(["--max-inflight-bytes", value]);
      expect(code).toBe(2);
      expect(stderr).toContain("--max-inflight-bytes");
      expect(stderr).toContain("at least 1MB");
    }
  });
});
