import { afterAll, afterEach, describe, expect, test } from "vitest";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { finished, spawnCli } from "../helpers/cli.js";
import { sharedConformanceBackends, type TestBackend } from "../helpers/backends.js";
import { grpcTransport } from "../helpers/clients.js";
import { freePort, waitFor } from "../helpers/wait.js";
import { EventLogClient } from "../../clients/event-log-client.js";

type Follower = ReturnType<typeof spawnCli>;

/** The records a `--json` follow printed so far, as `n` of each event (`gap` for gaps). */
function printed(proc: Follower): Array<number | string> {
  return proc.out.stdout
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => {
      const r = JSON.parse(l) as { kind: string; event?: { n: number } };
      return r.kind === "gap" ? "gap" : r.event!.n;
    });
}

/** Appends events `{n}` for each n of `ns`, one at a time, `gapMs` apart. */
async function appendSlowly(address: string, session: string, ns: number[], gapMs: number): Promise<void> {
  const log = new EventLogClient(grpcTransport(address));
  for (const n of ns) {
    await log.append(session, JSON.stringify({ n }));
    await new Promise((resolve) => setTimeout(resolve, gapMs));
  }
}

/**
 * `events tail` and `events read --follow` keep following when the server
 * ends their stream in a way a reader resumes from (UNAVAILABLE: a server
 * shutting down or restarting, `--max-connection-age` cutting the
 * connection; README "Shutdown"): they read again after the last record
 * printed, so every record is printed once, in order. Before, the first cut
 * ended the command (`Unavailable: http/2 stream closed with error code
 * CANCEL`), found by a fresh-eyes run.
 */
describe.each(sharedConformanceBackends())("events tail across interruptions, on $name", (backend: TestBackend) => {
  let server: ServerProcess | undefined;
  let follower: Follower | undefined;
  afterEach(async () => {
    follower?.kill("SIGKILL");
    await server?.stop();
  });
  afterAll(() => backend.teardown());

  test("resumes after every --max-connection-age cut, printing each record once", async () => {
    const { store, args } = await backend.setup();
    server = await startServer(["--store", store, ...args, "--max-connection-age", "1s", "--max-connection-age-grace", "200ms"]);
    follower = spawnCli(["events", "tail", "aged", "--json", "--event-log-url", server.address]);
    // About 5 s of appends: the follow's connection is cut about 4 times meanwhile.
    const ns = Array.from({ length: 25 }, (_, i) => i + 1);
    await appendSlowly(server.address, "aged", ns, 200);
    await waitFor(() => printed(follower!).length >= ns.length, 15_000, "every record to be printed");
    follower.kill("SIGINT");
    const r = await finished(follower);
    expect(r.code).toBe(0);
    expect(printed(follower)).toEqual(ns);
    expect(r.stderr).toMatch(/the follow was interrupted \(.*Unavailable.*\); following again after cursor /);
    expect(r.stderr).toContain(`${ns.length} record(s); resume with --cursor`);
  });

  test("a quiet follow keeps resuming past --resume-for: each resume that opens gives the next cut the whole window again", async () => {
    const { store, args } = await backend.setup();
    server = await startServer(["--store", store, ...args, "--max-connection-age", "1s", "--max-connection-age-grace", "100ms"]);
    await appendSlowly(server.address, "quiet", [1], 0);
    follower = spawnCli(["events", "tail", "quiet", "--json", "--resume-for", "2s", "--event-log-url", server.address]);
    await waitFor(() => printed(follower!).length >= 1, 10_000, "the record before the quiet time");
    // About 5 s without a record: the connection is cut 4 times or so, each more than --resume-for after the first.
    await new Promise((resolve) => setTimeout(resolve, 5_000));
    expect(follower.exitCode).toBeNull();
    expect(follower.out.stderr.match(/the follow was interrupted/g)?.length ?? 0).toBeGreaterThanOrEqual(3);
    await appendSlowly(server.address, "quiet", [2], 0);
    await waitFor(() => printed(follower!).length >= 2, 10_000, "the record after the quiet time");
    follower.kill("SIGINT");
    const r = await finished(follower);
    expect(r.code).toBe(0);
    expect(printed(follower)).toEqual([1, 2]);
  });

  test("resumes after the server restarts on the same port", async () => {
    const { store, args } = await backend.setup();
    const listen = `127.0.0.1:${await freePort()}`;
    server = await startServer(["--store", store, ...args], { listen });
    await appendSlowly(listen, "restarted", [1, 2], 0);
    follower = spawnCli(["events", "read", "restarted", "--follow", "--json", "--event-log-url", listen]);
    await waitFor(() => printed(follower!).length >= 2, 10_000, "the records before the restart");
    expect(await server.stop()).toBe(0);
    await waitFor(() => follower!.out.stderr.includes("the follow was interrupted"), 10_000, "the follow to say it was interrupted");
    // While no server listens, each attempt is refused; the follow keeps trying with a backoff.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(follower.exitCode).toBeNull();
    expect(follower.out.stderr).toMatch(/\(attempt [2-9]\)/);
    server = await startServer(["--store", store, ...args], { listen });
    await appendSlowly(listen, "restarted", [3, 4], 0);
    await waitFor(() => printed(follower!).length >= 4, 15_000, "the records after the restart");
    follower.kill("SIGINT");
    const r = await finished(follower);
    expect(r.code).toBe(0);
    expect(printed(follower)).toEqual([1, 2, 3, 4]);
  });

  test("ends with the last error once the server stays away past --resume-for; --resume-for 0 ends at the first interruption", async () => {
    const { store, args } = await backend.setup();
    server = await startServer(["--store", store, ...args]);
    await appendSlowly(server.address, "gone", [1], 0);
    follower = spawnCli(["events", "tail", "gone", "--json", "--resume-for", "1s", "--event-log-url", server.address]);
    const once = spawnCli(["events", "tail", "gone", "--json", "--resume-for", "0", "--event-log-url", server.address]);
    await waitFor(() => printed(follower!).length >= 1 && printed(once).length >= 1, 10_000, "the record before the stop");
    const ends = Promise.all([finished(follower, 15_000), finished(once, 15_000)]);
    await server.stop();
    const [r, r0] = await ends;
    expect([r.code, r0.code]).toEqual([1, 1]);
    expect(r.stderr).toContain("the follow was interrupted");
    expect(r.stderr).toMatch(/ReadAfter failed: Unavailable: .*\n1 record\(s\); resume with --cursor|1 record\(s\); resume with --cursor[^]*ReadAfter failed: Unavailable/);
    expect(r0.stderr).not.toContain("the follow was interrupted");
    expect(r0.stderr).toContain("ReadAfter failed: Unavailable");
  });
});
