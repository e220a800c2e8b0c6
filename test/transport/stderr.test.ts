import { afterEach, describe, expect, test } from "vitest";
import * as grpc from "@grpc/grpc-js";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { EventLogService } from "../../gen/mecatl/driver/v1/event_log_pb.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { grpcClient } from "../helpers/clients.js";
import { makePki } from "../helpers/certs.js";
import { rawGrpcClient, rawUnary } from "../helpers/raw-grpc.js";
import { appendSeqs, openFollow } from "../helpers/event-log.js";
import { metricValue } from "../helpers/metrics.js";
import { waitFor } from "../helpers/wait.js";

/** Every stderr line of `server` parsed as JSON; fails the test on a line that is not. */
function jsonLines(server: ServerProcess): Array<{ level: number; msg: string; [k: string]: unknown }> {
  return server.stderr.map((line) => {
    try {
      return JSON.parse(line) as { level: number; msg: string };
    } catch {
      throw new Error(`a stderr line is not JSON: ${line}`);
    }
  });
}

/**
 * Issue 10 deliverable 4 (peer side) and issue 11: a peer's TLS mistake is
 * logged in words naming the likely cause, and every line the server writes
 * to stderr is JSON.
 */
describe("what the server writes on stderr", () => {
  let server: ServerProcess | undefined;
  afterEach(async () => {
    await server?.stop();
    server = undefined;
  });

  test("a cleartext client against the TLS listener is logged as such", async () => {
    const pki = makePki();
    server = await startServer(["session-store", "--store", "sqlite::memory:", "--tls-cert", pki.serverCert, "--tls-key", pki.serverKey]);
    const client = rawGrpcClient(SessionStoreService, server.address);
    await expect(rawUnary(client, SessionStoreService.method.capabilities, {}, new grpc.Metadata())).rejects.toThrow();
    client.close();
    await waitFor(() => jsonLines(server!).some((l) => /cleartext to this TLS listener/.test(l.msg)), 10_000, "a log line naming the cleartext client");
    expect(jsonLines(server).find((l) => /cleartext to this TLS listener/.test(l.msg))!.peer).toMatch(/^127\.0\.0\.1:\d+$/);
  });

  test("an mTLS client whose certificate another CA signed is logged with its address and the verification failure (issue 14)", async () => {
    const pki = makePki();
    const other = makePki();
    server = await startServer(["session-store", "--store", "sqlite::memory:", "--tls-cert", pki.serverCert, "--tls-key", pki.serverKey, "--tls-client-ca", pki.caCert, "--connect-listen", "127.0.0.1:0"]);
    for (const [address, listener] of [
      [server.address, "gRPC"],
      [server.connectAddress!, "Connect"],
    ] as const) {
      const stranger = createClient(
        SessionStoreService,
        createGrpcTransport({
          baseUrl: `https://${address.replace("127.0.0.1", "localhost")}`,
          nodeOptions: { ca: pki.read(pki.caCert), cert: other.read(other.clientCert), key: other.read(other.clientKey) },
        }),
      );
      await expect(stranger.capabilities({})).rejects.toThrow();
      const refused = () => jsonLines(server!).find((l) => l.msg.startsWith(`refused a ${listener} connection`));
      await waitFor(() => refused() !== undefined, 10_000, `a log line for the refused ${listener} client`);
      expect(refused()).toMatchObject({
        peer: expect.stringMatching(/^127\.0\.0\.1:\d+$/),
        verifyError: "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
        msg: `refused a ${listener} connection: the client's certificate is not signed by the --tls-client-ca authority (UNABLE_TO_VERIFY_LEAF_SIGNATURE); give the client a certificate that CA signed, or add its CA to --tls-client-ca`,
      });
    }
  });

  test("an mTLS client without a certificate is logged as such", async () => {
    const pki = makePki();
    server = await startServer(["session-store", "--store", "sqlite::memory:", "--tls-cert", pki.serverCert, "--tls-key", pki.serverKey, "--tls-client-ca", pki.caCert]);
    const noCert = createClient(
      SessionStoreService,
      createGrpcTransport({ baseUrl: `https://${server.address.replace("127.0.0.1", "localhost")}`, nodeOptions: { ca: pki.read(pki.caCert) } }),
    );
    await expect(noCert.capabilities({})).rejects.toThrow();
    await waitFor(() => jsonLines(server!).some((l) => /sent no certificate.*--tls-client-ca/.test(l.msg)), 10_000, "a log line naming the missing client certificate");
    expect(jsonLines(server).find((l) => /sent no certificate/.test(l.msg))!.peer).toMatch(/^127\.0\.0\.1:\d+$/);
  });

  test("more than ten followers print no Node warning; shutdown ends them all", async () => {
    server = await startServer(["event-log", "--store", "sqlite::memory:", "--metrics-listen", "127.0.0.1:0"]);
    const log = grpcClient(EventLogService, server.address);
    await appendSeqs(log, "many", [0]);
    const follows = Array.from({ length: 16 }, () => openFollow(log, { sessionId: "many" }));
    for (const f of follows) await f.next();
    await waitFor(async () => (await metricValue(server!.metricsAddress!, "mecatl_drivers_followers")) === 16, 10_000, "sixteen followers");
    const outcomes = follows.map((f) => f.next().then(() => "record", (err: { code?: number }) => err.code));
    expect(await server.stop()).toBe(0);
    expect(new Set(await Promise.all(outcomes))).toEqual(new Set([14])); // every stream: UNAVAILABLE
    const lines = jsonLines(server);
    expect(lines.filter((l) => /MaxListeners|Warning/.test(l.msg + String(l.warning ?? "")))).toEqual([]);
  });
});
