import { afterAll, beforeAll } from "vitest";
import type { DescService } from "@bufbuild/protobuf";
import type { Client } from "@connectrpc/connect";
import { grpcClient } from "./clients.js";
import type { TestBackend } from "./backends.js";
import { startServer, type ServerProcess } from "./server.js";
import { openDriverClients, type DriverClientOptions, type DriverClients } from "../../clients/factory.js";
import { URL_FLAG_KEYS, type UrlFlag } from "../../clients/driver-flags.js";

/** A served backend and the driver clients pointed at it, valid inside the test file's tests. */
export interface ServedDrivers {
  readonly server: ServerProcess;
  readonly clients: DriverClients;
}

/**
 * Registers hooks that set `backend` up, start `serve <services...> --store
 * <store> ...flags`, and open a client for each of `services` at it (the
 * session store's negotiates Capabilities); afterwards everything is closed
 * and the backend torn down.
 */
export function serveDrivers(backend: TestBackend, services: UrlFlag[], flags: string[] = [], options: Omit<DriverClientOptions, `${string}Url`> = {}): ServedDrivers {
  let server: ServerProcess | undefined;
  let clients: DriverClients | undefined;
  beforeAll(async () => {
    const { store } = await backend.setup();
    server = await startServer([...services, "--store", store, ...flags]);
    const urls = Object.fromEntries(services.map((s) => [URL_FLAG_KEYS[s], server!.address]));
    clients = await openDriverClients({ ...options, ...urls });
  });
  afterAll(async () => {
    clients?.close();
    await server?.stop();
    await backend.teardown();
  });
  return {
    get server() {
      return server!;
    },
    get clients() {
      return clients!;
    },
  };
}

/** A served backend and a raw gRPC client of one service at it, valid inside the test file's tests. */
export interface ServedService<S extends DescService> {
  readonly server: ServerProcess;
  readonly client: Client<S>;
}

/**
 * Registers hooks that set `backend` up, start `serve <name> --store <store>`
 * and open a raw gRPC client of `service` at it (no capability negotiation,
 * no client-side checks: what the harness's wire sees); afterwards the
 * server is stopped and the backend torn down.
 */
export function serveService<S extends DescService>(backend: TestBackend, name: UrlFlag, service: S): ServedService<S> {
  let server: ServerProcess | undefined;
  let client: Client<S> | undefined;
  beforeAll(async () => {
    const { store } = await backend.setup();
    server = await startServer([name, "--store", store]);
    client = grpcClient(service, server.address);
  });
  afterAll(async () => {
    await server?.stop();
    await backend.teardown();
  });
  return {
    get server() {
      return server!;
    },
    get client() {
      return client!;
    },
  };
}
