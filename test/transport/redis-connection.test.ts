import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { spawnRedis, type SpawnedRedis } from "../helpers/redis-server.js";
import { runServeExpectingFailure, startServer } from "../helpers/server.js";
import { grpcClient } from "../helpers/clients.js";
import { makePki, type TestPki } from "../helpers/certs.js";

const snap = { format: "sessnap-json/1", payload: new Uint8Array([42]) };

describe("Redis credentials come from files", () => {
  let redis: SpawnedRedis;
  let dir: string;
  beforeAll(async () => {
    redis = await spawnRedis({ password: "s3cret-pass" });
    dir = mkdtempSync(join(tmpdir(), "mecatl-redis-cred-"));
    writeFileSync(join(dir, "password"), "s3cret-pass\n");
    writeFileSync(join(dir, "wrong"), "nope\n");
  });
  afterAll(() => redis?.stop());

  test("--redis-password-file authenticates", async () => {
    const server = await startServer(["session-store", "--store", redis.url, "--redis-password-file", join(dir, "password")]);
    try {
      const client = grpcClient(SessionStoreService, server.address);
      await client.save({ sessionId: "authed", snapshot: snap });
      expect((await client.load({ sessionId: "authed" })).snapshot?.payload).toEqual(new Uint8Array([42]));
    } finally {
      await server.stop();
    }
  });

  test("a missing or wrong password is a one-line startup error naming the flag", async () => {
    for (const extra of [[], ["--redis-password-file", join(dir, "wrong")]]) {
      const { code, stderr } = await runServeExpectingFailure(["--listen", "127.0.0.1:0", "--store", redis.url, ...extra]);
      expect(code).not.toBe(0);
      expect(stderr.trim().split("\n")).toHaveLength(1);
      expect(stderr).toContain("--redis-password-file");
    }
  });
});

describe("rediss:// with --redis-tls-ca", () => {
  let pki: TestPki;
  let redis: SpawnedRedis;
  beforeAll(async () => {
    pki = makePki();
    redis = await spawnRedis({ tls: { cert: pki.serverCert, key: pki.serverKey, ca: pki.caCert } });
  });
  afterAll(() => redis?.stop());

  test("connects over TLS when the CA is given", async () => {
    const server = await startServer(["session-store", "--store", `rediss://localhost:${redis.port}`, "--redis-tls-ca", pki.caCert]);
    try {
      const client = grpcClient(SessionStoreService, server.address);
      await client.save({ sessionId: "over-tls", snapshot: snap });
      expect((await client.list({})).sessions.map((s) => s.sessionId)).toContain("over-tls");
    } finally {
      await server.stop();
    }
  });

  test("refuses a server certificate it cannot verify", async () => {
    const { code, stderr } = await runServeExpectingFailure(["--listen", "127.0.0.1:0", "--store", `rediss://localhost:${redis.port}`]);
    expect(code).not.toBe(0);
    expect(stderr).toContain("cannot reach Redis");
  });
});
