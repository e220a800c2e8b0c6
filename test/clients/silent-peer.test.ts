import { afterAll, expect, test } from "vitest";
import { DriverConnections } from "../../clients/transport.js";
import { SessionLeaseClient } from "../../clients/session-lease-client.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { makePki } from "../helpers/certs.js";

const HINT = "the connection closed before the driver sent any HTTP/2 frame";
const servers: ServerProcess[] = [];
afterAll(() => Promise.all(servers.map((s) => s.stop())));

/** The message a call of `client` fails with (or "OK"). */
async function outcome(client: SessionLeaseClient, owner: string): Promise<string> {
  return client.acquire("silent-peer", owner).then(
    () => "OK",
    (e: unknown) => (e as Error).message,
  );
}

/**
 * The "did not answer in HTTP/2 ... serves TLS" hint (clients/transport.ts
 * namingSilentPeer) is given for the connection whose peer hung up without
 * a word of HTTP/2, and for no later failure: a refused connection after it
 * says so (found by a fresh-eyes run: the flag stuck to the target), and a
 * cleartext server on the same port is reached again.
 */
test("the silent-peer hint names only the connection that was silent", async () => {
  const pki = makePki();
  const tls = await startServer(["--store", "sqlite::memory:", "--tls-cert", pki.serverCert, "--tls-key", pki.serverKey]);
  servers.push(tls);
  const connections = new DriverConnections();
  try {
    const client = new SessionLeaseClient(connections.transport(tls.address));
    expect(await outcome(client, "a")).toContain(HINT);
    await tls.stop();
    const refused = await outcome(client, "b");
    expect(refused).not.toContain(HINT);
    expect(refused).toMatch(/ECONNREFUSED|connect/i);
    const plain = await startServer(["--store", "sqlite::memory:"], { listen: tls.address });
    servers.push(plain);
    expect(await outcome(client, "c")).toBe("OK");
  } finally {
    connections.close();
  }
});
