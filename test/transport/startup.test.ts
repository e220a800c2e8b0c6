import { describe, expect, test } from "vitest";
import { createServer, type AddressInfo } from "node:net";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawnRedis } from "../helpers/redis-server.js";
import { runServeExpectingFailure, startServer } from "../helpers/server.js";
import { freePort } from "../helpers/wait.js";

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

  test("a --metrics-listen port already in use is a one-line error with status 2, not a stack trace", async () => {
    const dir = mkdtempSync(join(tmpdir(), "mecatl-startup-"));
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
    try {
      const port = (taken.address() as AddressInfo).port;
      const { code, stderr } = await runServeExpectingFailure(["--listen", "127.0.0.1:0", "--store", `sqlite:${join(dir, "s.sqlite")}`, "--metrics-listen", `127.0.0.1:${port}`]);
      expect(code).toBe(2);
      expect(oneLine(stderr)).toContain(`--metrics-listen 127.0.0.1:${port}`);
    } finally {
      taken.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("a bad flag value is reported by the flag parser, with status 2 like every startup problem", async () => {
    const { code, stderr } = await runServeExpectingFailure(["--lease-ttl", "soon"]);
    expect(code).toBe(2);
    expect(stderr).toContain("--lease-ttl");
    expect((await runServeExpectingFailure(["--no-such-flag"])).code).toBe(2);
  });
});
