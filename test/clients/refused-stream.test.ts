import { afterEach, describe, expect, test } from "vitest";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { Code } from "@connectrpc/connect";
import { EventLogService } from "../../gen/mecatl/driver/v1/event_log_pb.js";
import { EventLogClient } from "../../clients/event-log-client.js";
import { DriverConnections } from "../../clients/transport.js";
import { InfrastructureError } from "../../clients/errors.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { conformanceBackends, type TestBackend } from "../helpers/backends.js";
import { grpcTransport } from "../helpers/clients.js";

/**
 * A stream the server refused unprocessed (RST_STREAM REFUSED_STREAM, RFC
 * 9113 section 8.7) is sent again by the clients, up to three sends in all,
 * as grpc-go does for the harness (clients/call.ts). No other failure is:
 * the clients never retry an outcome (wire-contract.md section 1). Found by
 * a fresh-eyes run: under `--max-connection-age`, about one append in 80
 * failed UNAVAILABLE with a stream refused at the connection's GOAWAY.
 */
describe("streams refused unprocessed", () => {
  let server: http2.Http2Server | undefined;
  afterEach(() => server?.close());

  /**
   * A cleartext HTTP/2 driver of EventLogService whose first `refuse` streams
   * are reset with `code` before anything is read; the rest are answered
   * (Append with cursor `c<n>`, ReadAfter with one record). Resolves to its
   * address and the calls its handlers ran.
   */
  async function refusingDriver(refuse: number, code: number): Promise<{ address: string; ran: string[] }> {
    const ran: string[] = [];
    const handler = connectNodeAdapter({
      routes: (router) =>
        router.service(EventLogService, {
          append: () => (ran.push("Append"), { cursor: `c${ran.length}` }),
          async *readAfter() {
            ran.push("ReadAfter");
            yield { kind: "event", event: { format: "eventlog-json/1", payload: new TextEncoder().encode("{}") }, cursor: "c1", live: false };
          },
        }),
    });
    let seen = 0;
    server = http2.createServer((req, res) => {
      if (seen++ < refuse) req.stream.close(code);
      else handler(req, res);
    });
    await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve));
    return { address: `127.0.0.1:${(server.address() as AddressInfo).port}`, ran };
  }

  test("an Append refused twice is sent a third time and answered; the handler ran once", async () => {
    const { address, ran } = await refusingDriver(2, http2.constants.NGHTTP2_REFUSED_STREAM);
    const log = new EventLogClient(new DriverConnections({}).transport(address));
    expect(await log.append("s", "{}", { timeoutMs: 5_000 })).toBe("c1");
    expect(ran).toEqual(["Append"]);
  });

  test("a stream refused three times fails UNAVAILABLE: three sends at most", async () => {
    const { address, ran } = await refusingDriver(3, http2.constants.NGHTTP2_REFUSED_STREAM);
    const err = await new EventLogClient(new DriverConnections({}).transport(address)).append("s", "{}").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InfrastructureError);
    expect((err as InfrastructureError).code).toBe(Code.Unavailable);
    expect((err as Error).message).toContain("REFUSED_STREAM");
    expect(ran).toEqual([]);
  });

  test("a ReadAfter refused before its first record is opened again", async () => {
    const { address, ran } = await refusingDriver(1, http2.constants.NGHTTP2_REFUSED_STREAM);
    const got = [];
    for await (const r of new EventLogClient(new DriverConnections({}).transport(address)).readAfter("s")) got.push(r.cursor);
    expect(got).toEqual(["c1"]);
    expect(ran).toEqual(["ReadAfter"]);
  });

  test.each([
    ["CANCEL", http2.constants.NGHTTP2_CANCEL],
    ["INTERNAL_ERROR", http2.constants.NGHTTP2_INTERNAL_ERROR],
  ])("a stream reset with %s, which may have been processed, is not sent again", async (_name, code) => {
    const { address, ran } = await refusingDriver(1, code);
    const err = await new EventLogClient(new DriverConnections({}).transport(address)).append("s", "{}").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InfrastructureError);
    expect(ran).toEqual([]);
  });
});

/** The same through a real server that ages its connections out every second: every append is answered, and stored once. */
describe.each(conformanceBackends())("appends across --max-connection-age, on $name", (backend: TestBackend) => {
  let driver: ServerProcess | undefined;
  afterEach(async () => {
    await driver?.stop();
    await backend.teardown();
  });

  test("400 appends over 4 s of connection ages: each answered OK, each stored once, in order", async () => {
    const { store, args } = await backend.setup();
    driver = await startServer(["--store", store, ...args, "--max-connection-age", "500ms", "--max-connection-age-grace", "100ms"]);
    const log = new EventLogClient(grpcTransport(driver.address));
    const cursors: string[] = [];
    const until = Date.now() + 4_000;
    for (let n = 1; n <= 400; n++) {
      cursors.push(await log.append("aged", JSON.stringify({ n })));
      if (Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 8));
    }
    // The whole log, read again when a connection age cuts the read (the test's own read, not what is under test).
    const readAll = async (tries: number): Promise<number[]> => {
      const stored: number[] = [];
      try {
        for await (const r of log.readAfter("aged")) if (r.kind === "event") stored.push((JSON.parse(Buffer.from(r.payload).toString("utf8")) as { n: number }).n);
        return stored;
      } catch (err) {
        if (tries <= 1) throw err;
        return readAll(tries - 1);
      }
    };
    expect(await readAll(5)).toEqual(Array.from({ length: 400 }, (_, i) => i + 1));
    expect(new Set(cursors).size).toBe(400);
  });
});
