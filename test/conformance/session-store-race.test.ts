import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Code, ConnectError } from "@connectrpc/connect";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { sharedConformanceBackends, type TestBackend } from "../helpers/backends.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { grpcClient } from "../helpers/clients.js";

describe.each(sharedConformanceBackends())("Create across two server processes on $name", (backend: TestBackend) => {
  let servers: ServerProcess[] = [];
  beforeAll(async () => {
    const { store } = await backend.setup();
    servers = await Promise.all([startServer(["session-store", "--store", store]), startServer(["session-store", "--store", store])]);
  });
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop()));
    await backend.teardown();
  });

  test("16 concurrent creators of one id split over two processes: exactly one OK, 20 rounds (8.5)", async () => {
    const clients = servers.map((s) => grpcClient(SessionStoreService, s.address));
    for (let round = 0; round < 20; round++) {
      const id = `cross-race-${round}`;
      const results = await Promise.allSettled(
        Array.from({ length: 16 }, (_, i) =>
          clients[i % 2]!.create({ sessionId: id, snapshot: { format: "sessnap-json/1", payload: new TextEncoder().encode(`creator-${i}`) } }),
        ),
      );
      const winners = results.flatMap((r, i) => (r.status === "fulfilled" ? [i] : []));
      expect(winners, `round ${round}`).toHaveLength(1);
      for (const r of results) if (r.status === "rejected") expect(ConnectError.from(r.reason).code).toBe(Code.AlreadyExists);
      const loaded = await clients[(winners[0]! + 1) % 2]!.load({ sessionId: id });
      expect(new TextDecoder().decode(loaded.snapshot!.payload)).toBe(`creator-${winners[0]}`);
    }
  });
});
