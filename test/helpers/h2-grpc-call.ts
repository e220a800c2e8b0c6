import { connect, constants } from "node:http2";

/** What {@link h2GrpcCall} saw of a call's answer. */
export interface H2GrpcAnswer {
  /** The response headers (for a trailers-only answer, the status too), without `date`. */
  headers: Record<string, unknown>;
  /** The trailers, empty for a trailers-only answer. */
  trailers: Record<string, unknown>;
  /** The answer's body: its gRPC messages, framed, as sent. */
  body: Buffer;
  /** `grpc-status`, from the trailers or the trailers-only headers. */
  status: string | undefined;
  /** `grpc-message`, URI-decoded ("" when absent). */
  message: string;
}

/**
 * Posts `body` (or its parts, each written a turn apart so that they arrive
 * as separate DATA frames) to `path` on `address` over cleartext HTTP/2 as a
 * gRPC call, with `extra` headers (`grpc-encoding`, `authorization`, ...),
 * and resolves once the stream closes, to everything the answer held.
 * For tests that send what no gRPC client would, or compare answers header
 * by header.
 */
export function h2GrpcCall(address: string, path: string, body: Buffer | Buffer[], extra: Record<string, string> = {}): Promise<H2GrpcAnswer> {
  return new Promise((resolve, reject) => {
    const session = connect(`http://${address}`);
    session.on("error", reject);
    const stream = session.request({ [constants.HTTP2_HEADER_METHOD]: "POST", [constants.HTTP2_HEADER_PATH]: path, "content-type": "application/grpc", te: "trailers", ...extra });
    let headers: Record<string, unknown> = {};
    let trailers: Record<string, unknown> = {};
    const chunks: Buffer[] = [];
    stream.on("response", (h) => {
      const { date: _date, ...rest } = h;
      headers = rest;
    });
    stream.on("trailers", (t) => (trailers = { ...t }));
    stream.on("data", (chunk: Buffer) => chunks.push(chunk));
    stream.on("error", reject);
    stream.on("close", () => {
      session.close();
      const status = (trailers["grpc-status"] ?? headers["grpc-status"]) as string | undefined;
      const message = decodeURIComponent(((trailers["grpc-message"] ?? headers["grpc-message"]) as string | undefined) ?? "");
      resolve({ headers, trailers, body: Buffer.concat(chunks), status, message });
    });
    const parts = Array.isArray(body) ? body : [body];
    const send = (i: number): void => {
      if (i === parts.length - 1) stream.end(parts[i]);
      else stream.write(parts[i], () => setTimeout(() => send(i + 1), 20));
    };
    send(0);
  });
}

/** A gRPC message prefix: flags 0 and a 4-byte big-endian length. */
export const grpcPrefix = (length: number): Buffer => Buffer.from([0, (length >>> 24) & 0xff, (length >>> 16) & 0xff, (length >>> 8) & 0xff, length & 0xff]);

/** `message` as one uncompressed gRPC message: its prefix, then its bytes. */
export const grpcFramed = (message: Uint8Array): Buffer => Buffer.concat([grpcPrefix(message.length), message]);
