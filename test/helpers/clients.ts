import { createClient, type Client, type Transport } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
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
