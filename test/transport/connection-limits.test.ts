import { afterAll, afterEach, beforeAll, describe, expect, test } from "vitest";
import { connect, type ClientHttp2Session, type Settings } from "node:http2";
import { startServer, type ServerProcess } from "../helpers/server.js";

/** Longest a test waits for the server's HTTP/2 frame (a bound on a hang, not a timing). */
const FRAME_WAIT_MS = 15_000;

/** Resolves with the first `event` of `session`, or rejects after {@link FRAME_WAIT_MS}. */
function next<T>(session: ClientHttp2Session, event: "remoteSettings" | "goaway"): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no ${event} from the server within ${FRAME_WAIT_MS} ms`)), FRAME_WAIT_MS);
    session.once(event, (value: T) => {
      clearTimeout(timer);
      resolve(value);
    });
  });
}

/**
 * Issue 9 deliverable 4 (README Serving): the per-connection stream limit and
 * the optional maximum connection age reach the wire. HTTP/2 carries both:
 * the limit as SETTINGS_MAX_CONCURRENT_STREAMS in the server's settings (so
 * clients queue further calls), the age as a GOAWAY once the connection is
 * older than `--max-connection-age` (so the client reconnects, possibly to
 * another replica).
 */
describe("connection limits of the gRPC listener", () => {
  let server: ServerProcess;
  let session: ClientHttp2Session | undefined;
  beforeAll(async () => {
    server = await startServer(["session-store", "--store", "sqlite::memory:", "--max-streams-per-connection", "7", "--max-connection-age", "1s", "--max-connection-age-grace", "1s"]);
  });
  afterEach(() => {
    session?.destroy();
    session = undefined;
  });
  afterAll(() => server?.stop());

  const open = () => {
    session = connect(`http://${server.address}`);
    session.on("error", () => undefined);
    return session;
  };

  test("--max-streams-per-connection is the SETTINGS_MAX_CONCURRENT_STREAMS the server announces", async () => {
    const settings = await next<Settings>(open(), "remoteSettings");
    expect(settings.maxConcurrentStreams).toBe(7);
  });

  test("--max-connection-age: the server sends GOAWAY (NO_ERROR) to a connection past its age", async () => {
    expect(await next<number>(open(), "goaway")).toBe(0);
  });
});
