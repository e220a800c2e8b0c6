import { isIP } from "node:net";

/**
 * True for `localhost` (any case) and loopback IP literals: 127.0.0.0/8 and
 * `::1`. This is the rule the harness uses to allow cleartext (wire-contract.md
 * section 6) and the rule `serve` uses to allow a cleartext listener.
 */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[(.*)\]$/, "$1");
  if (h.toLowerCase() === "localhost") return true;
  if (isIP(h) === 4) return h.startsWith("127.");
  if (isIP(h) === 6) return h === "::1" || h === "0:0:0:0:0:0:0:1";
  return false;
}

/** A parsed `--listen` value: a TCP host and port, or a unix socket path. */
export type ListenAddress = { kind: "tcp"; host: string; port: number } | { kind: "unix"; path: string };

/**
 * Parses `host:port`, `[v6]:port` or `unix:/path` (also `unix:///path`).
 * Port 0 asks the kernel for a free port.
 *
 * @throws Error naming the flag when the value has no port or a bad one.
 */
export function parseListenAddress(flag: string, value: string): ListenAddress {
  if (value.startsWith("unix:")) {
    const path = value.replace(/^unix:(\/\/)?/, "");
    if (path === "") throw new Error(`${flag} ${JSON.stringify(value)}: the unix socket path is empty`);
    return { kind: "unix", path };
  }
  const m = /^(\[[^\]]+\]|[^:]*):(\d+)$/.exec(value);
  if (m === null) throw new Error(`${flag} ${JSON.stringify(value)}: expected HOST:PORT, [IPv6]:PORT or unix:/PATH`);
  const port = Number(m[2]);
  if (port > 65535) throw new Error(`${flag} ${JSON.stringify(value)}: port out of range`);
  const host = m[1]!.replace(/^\[(.*)\]$/, "$1");
  return { kind: "tcp", host: host === "" ? "0.0.0.0" : host, port };
}

/** Formats a listen address for grpc-js (`host:port`, `[v6]:port`, `unix:/path`). */
export function formatListenAddress(a: ListenAddress): string {
  if (a.kind === "unix") return `unix:${a.path}`;
  return isIP(a.host) === 6 ? `[${a.host}]:${a.port}` : `${a.host}:${a.port}`;
}

/** True when a listener on this address may serve cleartext without `--insecure-listen`. */
export function isLocalListenAddress(a: ListenAddress): boolean {
  return a.kind === "unix" || isLoopbackHost(a.host);
}
