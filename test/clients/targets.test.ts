import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Command } from "commander";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { EventLogService } from "../../gen/mecatl/driver/v1/event_log_pb.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { startStubServer, stub } from "../helpers/stub-server.js";
import { makePki, type TestPki } from "../helpers/certs.js";
import { isLocalTarget, parseTarget, DriverConfigError } from "../../clients/targets.js";
import { CleartextRefusedError, DriverConnections } from "../../clients/transport.js";
import { openDriverClients } from "../../clients/factory.js";
import { addDriverOptions, driverClientOptions, type DriverFlags } from "../../clients/driver-flags.js";
import { InfrastructureError } from "../../clients/errors.js";
import { EventLogClient } from "../../clients/event-log-client.js";
import { Code } from "@connectrpc/connect";

const snapshot = (id: string) => new TextEncoder().encode(JSON.stringify({ id }));

describe("gRPC targets (wire-contract.md section 6)", () => {
  test.each([
    ["127.0.0.1:7443", { kind: "tcp", host: "127.0.0.1", port: 7443, local: true }],
    ["localhost:7443", { kind: "tcp", host: "localhost", port: 7443, local: true }],
    ["[::1]:7443", { kind: "tcp", host: "::1", port: 7443, local: true }],
    ["driver.example.com:7443", { kind: "tcp", host: "driver.example.com", port: 7443, local: false }],
    ["dns:///127.0.0.1:7443", { kind: "tcp", host: "127.0.0.1", port: 7443, local: false }],
    ["dns://8.8.8.8/driver.example.com:9", { kind: "tcp", host: "driver.example.com", port: 9, local: false }],
    ["driver.example.com", { kind: "tcp", host: "driver.example.com", port: 443, local: false }],
    ["unix:/run/mecatl/driver.sock", { kind: "unix", path: "/run/mecatl/driver.sock", local: true }],
    ["unix:///run/mecatl/driver.sock", { kind: "unix", path: "/run/mecatl/driver.sock", local: true }],
    ["unix:relative.sock", { kind: "unix", path: "relative.sock", local: true }],
    ["unix-abstract:mecatl", { kind: "unix", path: "\0mecatl", local: true }],
  ])("%s parses", (target, expected) => {
    expect(parseTarget(target)).toMatchObject({ target, ...expected });
  });

  test.each(["", "http://127.0.0.1:1", "https://driver.example.com:443", "grpc://127.0.0.1:1", "grpcs://h:1", "127.0.0.1:99999", ":1", "unix:", "unix://host/path", "a:b:c"])(
    "%j is refused with DriverConfigError",
    (target) => {
      expect(() => parseTarget(target)).toThrow(DriverConfigError);
    },
  );

  test.each([
    ["127.9.9.9:1", true],
    ["LOCALHOST:1", true],
    ["[::1]:7443", true],
    ["unix:///run/mecatl/driver.sock", true],
    ["10.0.0.1:1", false],
    ["", false],
    [":1", false],
    ["dns:///127.0.0.1:7443", false],
    ["driver.example.com:7443", false],
    ["localhost", false],
  ])("loopback classifier: %j local=%s (8.15)", (target, local) => {
    expect(isLocalTarget(target)).toBe(local);
  });

  test("cleartext to driver.example.com:7443 is refused with and without a token, naming CLEARTEXT and --driver-tls (8.15)", () => {
    for (const options of [{}, { authToken: "tok-123" }]) {
      const c = new DriverConnections(options);
      let err: unknown;
      try {
        c.transport("driver.example.com:7443");
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(CleartextRefusedError);
      expect((err as Error).message).toContain("CLEARTEXT");
      expect((err as Error).message).toContain("--driver-tls");
    }
  });

  test("local targets are allowed in cleartext, with a token too; TLS allows remote ones (8.15)", () => {
    const c = new DriverConnections({ authToken: "tok-123" });
    for (const t of ["127.0.0.1:7443", "localhost:7443", "[::1]:7443", "unix:///run/mecatl/driver.sock"]) expect(() => c.transport(t)).not.toThrow();
    expect(() => new DriverConnections({ tls: {} }).transport("driver.example.com:7443")).not.toThrow();
    c.close();
  });

  test("the factory refuses a bad target before any RPC", async () => {
    await expect(openDriverClients({ eventLogUrl: "127.0.0.1:1", sessionStoreUrl: "driver.example.com:7443" })).rejects.toBeInstanceOf(CleartextRefusedError);
  });
});

describe("driver flags (section 6)", () => {
  function parse(args: string[], env: Record<string, string> = {}): DriverFlags {
    const saved = process.env.MECATL_DRIVER_AUTH_TOKEN;
    if (env.MECATL_DRIVER_AUTH_TOKEN === undefined) delete process.env.MECATL_DRIVER_AUTH_TOKEN;
    else process.env.MECATL_DRIVER_AUTH_TOKEN = env.MECATL_DRIVER_AUTH_TOKEN;
    try {
      const cmd = addDriverOptions(new Command("x").exitOverride(), ["session-store", "event-log", "session-lease", "schedule-store"]);
      cmd.parse(args, { from: "user" });
      return cmd.opts<DriverFlags>();
    } finally {
      if (saved === undefined) delete process.env.MECATL_DRIVER_AUTH_TOKEN;
      else process.env.MECATL_DRIVER_AUTH_TOKEN = saved;
    }
  }

  test("the four --*-url flags reach the factory options", () => {
    const o = driverClientOptions(parse(["--session-store-url", "a:1", "--event-log-url", "b:2", "--session-lease-url", "unix:/s", "--schedule-store-url", "dns:///c:3"]));
    expect(o).toMatchObject({ sessionStoreUrl: "a:1", eventLogUrl: "b:2", sessionLeaseUrl: "unix:/s", scheduleStoreUrl: "dns:///c:3", tls: undefined });
  });

  test("CA, certificate or key without --driver-tls is an error; a certificate needs its key", () => {
    for (const [args, message] of [
      [["--driver-tls-ca", "/x"], "--driver-tls-ca requires --driver-tls"],
      [["--driver-tls-cert", "/x", "--driver-tls-key", "/y"], "--driver-tls-cert, --driver-tls-key require --driver-tls"],
      [["--driver-tls-key", "/y"], "--driver-tls-key requires --driver-tls"],
    ] as const) {
      expect(() => driverClientOptions(parse([...args]))).toThrow(message);
    }
    expect(() => driverClientOptions(parse(["--driver-tls", "--driver-tls-cert", "/x"]))).toThrow(/go together/);
    expect(() => driverClientOptions(parse(["--driver-tls", "--driver-tls-ca", "/no/such/file"]))).toThrow(/--driver-tls-ca/);
  });

  test("the token comes from --driver-auth-token, else MECATL_DRIVER_AUTH_TOKEN", () => {
    expect(driverClientOptions(parse([], { MECATL_DRIVER_AUTH_TOKEN: "from-env" })).authToken).toBe("from-env");
    expect(driverClientOptions(parse(["--driver-auth-token", "from-flag"], { MECATL_DRIVER_AUTH_TOKEN: "from-env" })).authToken).toBe("from-flag");
    expect(driverClientOptions(parse([])).authToken).toBeUndefined();
  });
});

describe("connections against servers", () => {
  test("equal targets share one HTTP/2 connection; the bearer token arrives as 'Bearer tok-123' (6, 8.15)", async () => {
    const server = await startStubServer([
      stub(SessionStoreService, { capabilities: () => ({ contract: "session-store/1", list: true, delete: true, create: true }), list: () => ({}) }),
      stub(EventLogService, {
        async *read() {
          yield* [];
        },
      }),
    ]);
    const clients = await openDriverClients({ sessionStoreUrl: server.address, eventLogUrl: server.address, authToken: "tok-123" });
    try {
      await clients.sessionStore!.list();
      for await (const _ of clients.eventLog!.read("s")) void _;
      expect(clients.connections.size).toBe(1);
      expect(server.connections()).toBe(1);
      expect(server.authorization).toEqual(["Bearer tok-123", "Bearer tok-123", "Bearer tok-123"]);
    } finally {
      clients.close();
      await server.close();
    }
  });

  describe("a real server on a unix socket", () => {
    let server: ServerProcess;
    let dir: string;
    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), "mecatl-unix-"));
      server = await startServer(["session-store", "--store", "sqlite::memory:"], { listen: `unix:${join(dir, "driver.sock")}` });
    });
    afterAll(async () => {
      await server?.stop();
      rmSync(dir, { recursive: true, force: true });
    });

    test.each(["unix:", "unix://"])("%s prefix reaches the server", async (prefix) => {
      const clients = await openDriverClients({ sessionStoreUrl: `${prefix}${join(dir, "driver.sock")}` });
      try {
        await clients.sessionStore!.save("over-unix", snapshot("over-unix"));
        expect((await clients.sessionStore!.load("over-unix")).payload.byteLength).toBeGreaterThan(0);
      } finally {
        clients.close();
      }
    });
  });

  test("a unix: target with no socket file (its server stopped and removed it) is UNAVAILABLE, as a refused port is", async () => {
    const dir = mkdtempSync(join(tmpdir(), "mecatl-unix-gone-"));
    try {
      const log = new EventLogClient(new DriverConnections({}).transport(`unix:${join(dir, "gone.sock")}`));
      const err = await log.append("s", "{}").catch((e: unknown) => e);
      expect(err).toBeInstanceOf(InfrastructureError);
      expect((err as InfrastructureError).code).toBe(Code.Unavailable);
      expect((err as Error).message).toContain("ENOENT");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  describe("a real server with mutual TLS", () => {
    let server: ServerProcess;
    let pki: TestPki;
    beforeAll(async () => {
      pki = makePki();
      server = await startServer(["session-store", "--store", "sqlite::memory:", "--tls-cert", pki.serverCert, "--tls-key", pki.serverKey, "--tls-client-ca", pki.caCert]);
    });
    afterAll(async () => {
      await server?.stop();
      rmSync(pki.dir, { recursive: true, force: true });
    });

    const tlsFlags = () => ({ driverTls: true, driverTlsCa: pki.caCert, driverTlsCert: pki.clientCert, driverTlsKey: pki.clientKey });

    test("--driver-tls with CA and client certificate works by name, by IP and through dns:///", async () => {
      const port = server.address.split(":").pop();
      for (const target of [`localhost:${port}`, `127.0.0.1:${port}`, `dns:///localhost:${port}`]) {
        const clients = await openDriverClients(driverClientOptions({ sessionStoreUrl: target, ...tlsFlags() }));
        try {
          await clients.sessionStore!.save("over-tls", snapshot("over-tls"));
        } finally {
          clients.close();
        }
      }
    });

    test("without the client certificate, or trusting only the system roots, the connection is refused", async () => {
      for (const flags of [{ driverTls: true, driverTlsCa: pki.caCert }, { driverTls: true }]) {
        const err = await openDriverClients(driverClientOptions({ sessionStoreUrl: server.address, ...flags })).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(InfrastructureError);
      }
    });
  });
});
