import { afterAll, beforeAll } from "vitest";
import type { Client } from "@connectrpc/connect";
import { ScheduleOneShotReArmerService, ScheduleStoreService } from "../../gen/mecatl/driver/v1/schedule_store_pb.js";
import type { TestBackend } from "./backends.js";
import { grpcClient } from "./clients.js";
import { startServer, type ServerProcess } from "./server.js";

/** Clients of one `serve schedule-store` process; filled in by the suite's beforeAll. */
export interface ScheduleClients {
  client: Client<typeof ScheduleStoreService>;
  rearmer: Client<typeof ScheduleOneShotReArmerService>;
}

/**
 * Registers beforeAll/afterAll hooks that set up `backend`, start one
 * `serve schedule-store` process on it, and tear both down. Use the returned
 * object's clients inside tests.
 */
export function serveSchedules(backend: TestBackend): ScheduleClients {
  const clients = {} as ScheduleClients;
  let server: ServerProcess | undefined;
  beforeAll(async () => {
    const { store } = await backend.setup();
    server = await startServer(["schedule-store", "--store", store]);
    clients.client = grpcClient(ScheduleStoreService, server.address);
    clients.rearmer = grpcClient(ScheduleOneShotReArmerService, server.address);
  });
  afterAll(async () => {
    await server?.stop();
    await backend.teardown();
  });
  return clients;
}
