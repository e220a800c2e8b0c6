import { createClient, type Client, type Transport } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import type { DescService } from "@bufbuild/protobuf";

/** 64 MiB plus headroom, the limit both sides use (wire-contract.md section 1). */
export const MAX_MESSAGE_BYTES = 65 * 1024 * 1024;

/**
 * A gRPC transport (HTTP/2, binary protobuf) to a test server, as the Go
 * harness speaks it. `address` is `host:port`; `token` adds a bearer header.
 */
export function grpcTransport(address: string, options: { token?: string } = {}): Transport {
  return createGrpcTransport({
    baseUrl: `http://${address}`,
    readMaxBytes: MAX_MESSAGE_BYTES,
    writeMaxBytes: MAX_MESSAGE_BYTES,
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
