import { createClient, type Client, type Transport } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import type { ClientHttp2Stream, ClientSessionRequestOptions, OutgoingHttpHeaders } from "node:http2";
import type { DescService } from "@bufbuild/protobuf";
import { SESSION_MEMORY_MIB } from "../../clients/transport.js";

/** 64 MiB plus headroom, the limit both sides use (wire-contract.md section 1). */
export const MAX_MESSAGE_BYTES = 65 * 1024 * 1024;

/**
 * A gRPC transport (HTTP/2, binary protobuf) to a test server, as the Go
 * harness speaks it. `address` is `host:port`; `token` adds a bearer header;
 * `readMaxBytes` lowers the largest answer accepted (default 65 MiB).
 */
export function grpcTransport(address: string, options: { token?: string; readMaxBytes?: number } = {}): Transport {
  return createGrpcTransport({
    baseUrl: `http://${address}`,
    readMaxBytes: options.readMaxBytes ?? MAX_MESSAGE_BYTES,
    writeMaxBytes: MAX_MESSAGE_BYTES,
    // Node's 10 MiB default refuses new streams once a few multi-MiB calls share the connection.
    nodeOptions: { maxSessionMemory: SESSION_MEMORY_MIB },
    interceptors:
      options.token === undefined
        ? []
        : [
            (next) => (req) => {
              req.header.set("authorization", `Bearer ${options.token}`);
              return next(req);
            },
          ],
  });
}

/** A typed client for `service` over {@link grpcTransport}. */
export function grpcClient<S extends DescService>(service: S, address: string, options: { token?: string } = {}): Client<S> {
  return createClient(service, grpcTransport(address, options));
}

/** An HTTP/2 session manager that tells when each request body was sent in full. */
class SentSignallingSessionManager extends Http2SessionManager {
  constructor(
    url: string,
    private readonly onSent: (path: string) => void,
  ) {
    super(url, undefined, { maxSessionMemory: SESSION_MEMORY_MIB });
  }

  override async request(method: string, path: string, headers: OutgoingHttpHeaders, options: Omit<ClientSessionRequestOptions, "signal">): Promise<ClientHttp2Stream> {
    const stream = await super.request(method, path, headers, options);
    stream.once("finish", () => this.onSent(path));
    return stream;
  }
}

/**
 * A typed gRPC client whose `sent(method)` resolves once the request of a
 * call to `method` (e.g. `Save`) has been written in full. HTTP/2 flow
 * control lets a client write a body only as fast as the server reads it,
 * so once a body larger than the flow-control window (64 KiB unless the
 * server grants more) is sent, the server has read most of it: the call is
 * in flight there (issue 15: the "request arrived" signal instead of a sleep).
 */
export function grpcClientWithSentSignal<S extends DescService>(service: S, address: string): { client: Client<S>; sent(method: string): Promise<void> } {
  const signals = new Map<string, { promise: Promise<void>; resolve: () => void }>();
  const signal = (path: string) => {
    let s = signals.get(path);
    if (s === undefined) {
      let resolve!: () => void;
      const promise = new Promise<void>((r) => (resolve = r));
      signals.set(path, (s = { promise, resolve }));
    }
    return s;
  };
  const manager = new SentSignallingSessionManager(`http://${address}`, (path) => signal(path).resolve());
  const transport = createGrpcTransport({ baseUrl: `http://${address}`, readMaxBytes: MAX_MESSAGE_BYTES, writeMaxBytes: MAX_MESSAGE_BYTES, sessionManager: manager });
  return { client: createClient(service, transport), sent: (method) => signal(`/${service.typeName}/${method}`).promise };
}

/** The Go harness's receive limit: 64 MiB exactly (wire-contract.md section 1). */
export const HARNESS_MESSAGE_BYTES = 64 * 1024 * 1024;

/**
 * A typed client that, like the Go harness, refuses any answer larger than
 * {@link HARNESS_MESSAGE_BYTES}, so a test can show an answer fits the
 * harness, not only this server's larger limit.
 */
export function harnessClient<S extends DescService>(service: S, address: string): Client<S> {
  return createClient(service, grpcTransport(address, { readMaxBytes: HARNESS_MESSAGE_BYTES }));
}
