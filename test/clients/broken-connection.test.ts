import { afterEach, expect, test } from "vitest";
import { Code } from "@connectrpc/connect";
import { createServer, type Server } from "node:net";
import { DriverConnections } from "../../clients/transport.js";
import { ScheduleStoreClient } from "../../clients/schedule-store-client.js";
import { InfrastructureError } from "../../clients/errors.js";

let server: Server | undefined;
let connections: DriverConnections | undefined;
afterEach(async () => {
  connections?.close();
  await new Promise((r) => (server === undefined ? r(undefined) : server.close(r)));
});

/**
 * A driver whose connection breaks under a call (its process killed, a
 * proxy reset): connect-node reports ECONNRESET as ABORTED, which the
 * schedule client used to read as "deletion pending". grpc-go, which the
 * harness uses, says UNAVAILABLE, and so must our clients (issue 9).
 */
test("a connection reset under a call is UNAVAILABLE, not a rule's answer", async () => {
  // Reads the request, then resets the connection without answering.
  server = createServer((socket) => socket.once("data", () => setImmediate(() => socket.resetAndDestroy())));
  await new Promise<void>((r) => server!.listen(0, "127.0.0.1", r));
  const address = server.address();
  connections = new DriverConnections();
  const client = new ScheduleStoreClient(connections.transport(`127.0.0.1:${typeof address === "object" && address !== null ? address.port : 0}`));
  const err = await client.beginScheduleDelete("s", "d1").then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(InfrastructureError);
  expect(Code[(err as InfrastructureError).code]).toBe("Unavailable");
});
