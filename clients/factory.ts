import type { CallOptions } from "./call.js";
import { DriverConnections, type ConnectionOptions } from "./transport.js";
import { SessionStoreClient } from "./session-store-client.js";
import { EventLogClient } from "./event-log-client.js";
import { SessionLeaseClient } from "./session-lease-client.js";
import { ScheduleStoreClient } from "./schedule-store-client.js";

/**
 * The four driver targets (the harness's `--session-store-url`,
 * `--event-log-url`, `--session-lease-url`, `--schedule-store-url`) plus the
 * connection options of the `--driver-*` flags. A target left out means that
 * client is not made.
 */
export interface DriverClientOptions extends ConnectionOptions {
  sessionStoreUrl?: string;
  eventLogUrl?: string;
  sessionLeaseUrl?: string;
  scheduleStoreUrl?: string;
}

/** The clients made from {@link DriverClientOptions}; close them together. */
export interface DriverClients {
  sessionStore?: SessionStoreClient;
  eventLog?: EventLogClient;
  sessionLease?: SessionLeaseClient;
  scheduleStore?: ScheduleStoreClient;
  /** The shared connections: equal targets use one HTTP/2 connection (wire-contract.md section 6). */
  connections: DriverConnections;
  /** Closes every connection. */
  close(): void;
}

/**
 * Builds the clients the options name. Every target is parsed and checked
 * against the cleartext rule first, so a bad flag fails before any RPC; then
 * the session store negotiates Capabilities (5 s deadline, fail closed). The
 * other clients connect lazily on their first RPC.
 *
 * @throws DriverConfigError / CleartextRefusedError for a bad target or flag;
 *   what {@link SessionStoreClient.connect} throws when the probe fails (the
 *   connections are closed first).
 */
export async function openDriverClients(options: DriverClientOptions, call?: CallOptions): Promise<DriverClients> {
  const connections = new DriverConnections({ tls: options.tls, authToken: options.authToken });
  const t = (target: string | undefined) => (target === undefined ? undefined : connections.transport(target));
  try {
    const sessionStoreTransport = t(options.sessionStoreUrl);
    const eventLog = options.eventLogUrl === undefined ? undefined : new EventLogClient(t(options.eventLogUrl)!);
    const sessionLease = options.sessionLeaseUrl === undefined ? undefined : new SessionLeaseClient(t(options.sessionLeaseUrl)!);
    const scheduleStore = options.scheduleStoreUrl === undefined ? undefined : new ScheduleStoreClient(t(options.scheduleStoreUrl)!);
    const sessionStore = sessionStoreTransport === undefined ? undefined : await SessionStoreClient.connect(sessionStoreTransport, call);
    return { sessionStore, eventLog, sessionLease, scheduleStore, connections, close: () => connections.close() };
  } catch (err) {
    connections.close();
    throw err;
  }
}
