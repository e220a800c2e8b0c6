import { createServer, type Http2Server } from "node:http2";
import type { AddressInfo } from "node:net";
import type { DescService } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";

/**
 * An in-process gRPC server (cleartext HTTP/2 on 127.0.0.1) that answers with
 * whatever a test scripts: wrong contracts, foreign formats, faults mid-stream.
 * It plays a misbehaving driver, which the real server never is, to test the
 * client's guards. Backends are never stubbed.
 */
export interface StubServer {
  /** `127.0.0.1:port`. */
  address: string;
  /** Every RPC received, as `Service/Method`, in arrival order. */
  calls: string[];
  /** The `authorization` header of every RPC received. */
  authorization: Array<string | null>;
  /** HTTP/2 connections accepted so far. */
  connections(): number;
  close(): Promise<void>;
}

/** One service to stub: its descriptor and the methods the test implements (others answer UNIMPLEMENTED). */
export interface StubService<S extends DescService = DescService> {
  desc: S;
  impl: Partial<ServiceImpl<S>>;
}

/** A typed {@link StubService}. */
export function stub<S extends DescService>(desc: S, impl: Partial<ServiceImpl<S>>): StubService {
  return { desc, impl } as unknown as StubService;
}

/** Starts a stub server for `services` on an ephemeral port. */
export async function startStubServer(services: StubService[]): Promise<StubServer> {
  const calls: string[] = [];
  const authorization: Array<string | null> = [];
  let sessions = 0;
  const handler = connectNodeAdapter({
    readMaxBytes: 65 * 1024 * 1024,
    writeMaxBytes: 65 * 1024 * 1024,
    routes: (router) => {
      for (const s of services) router.service(s.desc, s.impl as never);
    },
    interceptors: [
      (next) => async (req) => {
        calls.push(`${req.service.name}/${req.method.name}`);
        authorization.push(req.header.get("authorization"));
        return next(req);
      },
    ],
  });
  const server: Http2Server = createServer(handler);
  server.on("session", (s) => {
    sessions++;
    s.on("error", () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const open = new Set<import("node:net").Socket>();
  server.on("connection", (sock: import("node:net").Socket) => {
    open.add(sock);
    sock.on("close", () => open.delete(sock));
  });
  return {
    address: `127.0.0.1:${port}`,
    calls,
    authorization,
    connections: () => sessions,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of open) s.destroy();
        server.close(() => resolve());
      }),
  };
}
