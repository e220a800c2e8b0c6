import type { EventEmitter } from "node:events";

/** True when a Redis error message means the credentials were refused (or are missing). */
export function credentialsRefused(message: string): boolean {
  return /WRONGPASS|NOAUTH|NOPERM|invalid username-password/i.test(message);
}

const causes = new WeakMap<object, string>();

/**
 * Remembers why the connections of `client` (a single-Redis connection, a
 * cluster node connection or a cluster client) cannot be opened again, when
 * Redis refuses the credentials after a reconnect (issue 13 follow-up: a
 * password changed on the server, `requirepass` set, an ACL user removed):
 * ioredis reports that only as an `error` event per attempt and keeps
 * reconnecting, so callers would otherwise see "not connected" alone. The
 * cause is set from the first such error (and again only when its text
 * changes, so a change is logged once, not per retry) and cleared when the
 * connection is ready again; `changed` is called on each change (health
 * listeners). Read it with {@link reconnectCause}.
 */
export function trackReconnectCause(client: EventEmitter, changed: () => void = () => undefined): void {
  client.on("error", (err: Error & { lastNodeError?: Error }) => {
    // A cluster client that cannot refresh its slot map carries the node's own error.
    const message = (err.lastNodeError ?? err).message;
    if (!credentialsRefused(message)) return;
    const cause = `Redis refused the credentials on reconnect (${message.replace(/^Ready check failed: /, "")}); check --redis-username-file and --redis-password-file`;
    if (causes.get(client) === cause) return;
    causes.set(client, cause);
    changed();
  });
  client.on("ready", () => {
    if (causes.delete(client)) changed();
  });
}

/**
 * Why `client` cannot reconnect, as one phrase such as `Redis refused the
 * credentials on reconnect (NOAUTH Authentication required.); check
 * --redis-username-file and --redis-password-file`, or undefined when no
 * such cause is known (see {@link trackReconnectCause}).
 */
export function reconnectCause(client: object): string | undefined {
  return causes.get(client);
}
