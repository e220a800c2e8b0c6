import { isIP } from "node:net";
import { isLoopbackHost } from "../services/server/addresses.js";

/** Port grpc-go's dns resolver assumes when a target names no port. */
export const DEFAULT_TARGET_PORT = 443;

/**
 * A gRPC target string as the harness passes it to grpc-go (wire-contract.md
 * section 6), resolved to what Node needs to open a connection.
 *
 * - `tcp`: `host:port`, `[v6]:port`, `dns:///host:port`, `dns://auth/host:port`
 *   or `passthrough:///host:port`; `host` is a name or an IP literal without
 *   brackets, `port` defaults to 443 when absent.
 * - `unix`: `unix:/path`, `unix:///path`, `unix:relative/path`, or
 *   `unix-abstract:name` (then `path` starts with a NUL byte, Linux's
 *   abstract namespace).
 *
 * `local` is the harness's cleartext rule ({@link isLocalTarget}), computed on
 * the target text as given.
 */
export type DriverTarget =
  | { kind: "tcp"; target: string; host: string; port: number; local: boolean }
  | { kind: "unix"; target: string; path: string; local: true };

/** A target string, flag combination or file the client cannot use; raised before any connection is opened. */
export class DriverConfigError extends Error {
  override name = "DriverConfigError";
}

/**
 * The harness's cleartext rule (wire-contract.md sections 6 and 8.15): a target
 * may be dialled without TLS only when it starts with `unix:` or
 * `unix-abstract:`, or when the whole string splits as `host:port` and the host
 * is `localhost` (any case) or a loopback IP (127.0.0.0/8, `::1`). Anything
 * else is remote, including `dns:///127.0.0.1:x` (its "host" is not an IP) and
 * an empty host such as `:1`.
 */
export function isLocalTarget(target: string): boolean {
  if (target.startsWith("unix:") || target.startsWith("unix-abstract:")) return true;
  const hp = splitHostPort(target);
  return hp !== undefined && hp.host !== "" && isLoopbackHost(hp.host);
}

/**
 * Splits `host:port` or `[v6]:port` the way Go's net.SplitHostPort does: the
 * port is required, and an unbracketed host must not contain a colon.
 *
 * @returns undefined when the text is not of that shape.
 */
export function splitHostPort(text: string): { host: string; port: string } | undefined {
  const bracketed = /^\[([^\]]*)\]:([^:]*)$/.exec(text);
  if (bracketed !== null) return { host: bracketed[1]!, port: bracketed[2]! };
  const plain = /^([^:[\]]*):([^:]*)$/.exec(text);
  if (plain !== null) return { host: plain[1]!, port: plain[2]! };
  return undefined;
}

function parseEndpoint(target: string, endpoint: string): { host: string; port: number } {
  let host: string;
  let portText: string;
  const hp = splitHostPort(endpoint);
  if (hp !== undefined) {
    ({ host, port: portText } = hp);
  } else if (isIP(endpoint.replace(/^\[(.*)\]$/, "$1")) !== 0 || /^[^:[\]]+$/.test(endpoint)) {
    host = endpoint.replace(/^\[(.*)\]$/, "$1");
    portText = String(DEFAULT_TARGET_PORT);
  } else {
    throw new DriverConfigError(`target ${JSON.stringify(target)}: expected HOST:PORT, [IPv6]:PORT, dns:///HOST:PORT or unix:/PATH`);
  }
  if (host === "") throw new DriverConfigError(`target ${JSON.stringify(target)}: the host is empty`);
  if (!/^\d{1,5}$/.test(portText) || Number(portText) > 65535) {
    throw new DriverConfigError(`target ${JSON.stringify(target)}: port ${JSON.stringify(portText)} is not a number from 0 to 65535`);
  }
  return { host, port: Number(portText) };
}

function parseUnix(target: string): string {
  if (target.startsWith("unix-abstract:")) {
    const name = target.slice("unix-abstract:".length);
    if (name === "") throw new DriverConfigError(`target ${JSON.stringify(target)}: the abstract socket name is empty`);
    return `\0${name}`;
  }
  let path = target.slice("unix:".length);
  if (path.startsWith("//")) {
    path = path.slice(2);
    if (!path.startsWith("/")) throw new DriverConfigError(`target ${JSON.stringify(target)}: a unix target takes no authority; write unix:///ABSOLUTE/PATH or unix:PATH`);
  }
  if (path === "") throw new DriverConfigError(`target ${JSON.stringify(target)}: the unix socket path is empty`);
  return path;
}

/**
 * Parses a `--*-url` value (wire-contract.md section 6). URL schemes such as
 * `http://`, `https://`, `grpc://` and `grpcs://` are refused: TLS is chosen
 * with `--driver-tls`, never by the target.
 *
 * @throws DriverConfigError naming the target when it cannot be used.
 */
export function parseTarget(target: string): DriverTarget {
  const t = target.trim();
  if (t === "") throw new DriverConfigError("the target is empty; expected HOST:PORT, dns:///HOST:PORT or unix:/PATH");
  if (t !== target) throw new DriverConfigError(`target ${JSON.stringify(target)}: remove the surrounding spaces`);
  if (t.startsWith("unix:") || t.startsWith("unix-abstract:")) return { kind: "unix", target, path: parseUnix(t), local: true };
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/([^/]*)\/(.*)$/.exec(t);
  if (scheme !== null) {
    const name = scheme[1]!.toLowerCase();
    if (name !== "dns" && name !== "passthrough") {
      throw new DriverConfigError(
        `target ${JSON.stringify(target)}: the ${name}:// scheme is not a gRPC target; write HOST:PORT (TLS is enabled with --driver-tls, not by a scheme)`,
      );
    }
    return { kind: "tcp", target, ...parseEndpoint(target, scheme[3]!), local: isLocalTarget(target) };
  }
  if (/^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(t)) {
    throw new DriverConfigError(`target ${JSON.stringify(target)}: not a gRPC target; write HOST:PORT, dns:///HOST:PORT or unix:/PATH (TLS is enabled with --driver-tls)`);
  }
  if (t.startsWith("dns:")) return { kind: "tcp", target, ...parseEndpoint(target, t.slice(4)), local: false };
  return { kind: "tcp", target, ...parseEndpoint(target, t), local: isLocalTarget(target) };
}
