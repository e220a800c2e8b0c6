import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { spawn } from "node:child_process";
import { MAIN, startServer, type ServerProcess } from "../helpers/server.js";
import { grpcTransport } from "../helpers/clients.js";
import { rssBytes } from "../helpers/rss.js";
import { waitFor } from "../helpers/wait.js";
import { EventLogClient } from "../../clients/event-log-client.js";

const MiB = 1024 * 1024;

/**
 * The CLI's stdout (clients/cli/output.ts), found by a fresh-eyes run: a
 * reader that goes away ends the command quietly, and a follow whose reader
 * is slow waits for it instead of holding every record in memory (before:
 * 115 MB of RSS after 20 MB of records; an EPIPE stack trace at `| head -1`).
 */
describe("the CLI's stdout", () => {
  let server: ServerProcess;
  let log: EventLogClient;
  beforeAll(async () => {
    server = await startServer(["--store", "sqlite::memory:"]);
    log = new EventLogClient(grpcTransport(server.address));
    for (let n = 1; n <= 50; n++) await log.append("piped", JSON.stringify({ n }));
  });
  afterAll(() => server?.stop());

  test("a reader that goes away (| head -1) ends the command with status 0 and no stack trace", async () => {
    const shell = spawn("bash", ["-c", `"${process.execPath}" "${MAIN}" events read piped --json --event-log-url ${server.address} | head -1; echo "status=\${PIPESTATUS[0]}" >&2`], { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    shell.stdout.setEncoding("utf8").on("data", (c: string) => (out += c));
    shell.stderr.setEncoding("utf8").on("data", (c: string) => (err += c));
    await new Promise((resolve) => shell.once("close", resolve));
    expect(JSON.parse(out.trim())).toMatchObject({ kind: "event", event: { n: 1 } });
    expect(err).toContain("status=0");
    expect(err).not.toContain("EPIPE");
  });

  test("a follow whose reader does not read holds back: its memory stays bounded while 24 MiB of records are appended, and every record comes once reading resumes", async () => {
    const payload = "x".repeat(8 * 1024);
    const follow = spawn(process.execPath, [MAIN, "events", "tail", "slow", "--json", "--event-log-url", server.address], { stdio: ["ignore", "pipe", "pipe"] });
    try {
      follow.stdout.pause();
      // The follow is open and its first record written before the baseline is read.
      await log.append("slow", JSON.stringify({ n: 0, payload }));
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      const before = rssBytes(follow.pid!);
      for (let n = 1; n <= 3000; n++) await log.append("slow", JSON.stringify({ n, payload }));
      const grown = rssBytes(follow.pid!) - before;
      console.log(`CLI RSS grew ${(grown / MiB).toFixed(1)} MiB while 24 MiB of records were appended`);
      // What is held: stdout's buffer, the HTTP/2 stream's window and one message at a time, not 24 MiB of records.
      expect(grown).toBeLessThan(16 * MiB);
      let lines = 0;
      let pending = "";
      follow.stdout.setEncoding("utf8").on("data", (c: string) => {
        const parts = (pending + c).split("\n");
        pending = parts.pop()!;
        lines += parts.length;
      });
      follow.stdout.resume();
      await waitFor(() => lines >= 3001, 60_000, "every record to be printed");
      expect(lines).toBe(3001);
    } finally {
      follow.kill("SIGKILL");
    }
  }, 120_000);

  test.each(["reads the rest", "goes away"])("Ctrl-C during a plain read that has not reached the log's end exits 130 with its count, not 0 as if the log were read whole, when its reader then %s", async (then) => {
    // "slow" holds 3001 records of 8 KiB (the test before); stdout is not read, so the read is held part way.
    const read = spawn(process.execPath, [MAIN, "events", "read", "slow", "--json", "--event-log-url", server.address], { stdio: ["ignore", "pipe", "pipe"] });
    read.stdout.pause();
    let err = "";
    read.stderr.setEncoding("utf8").on("data", (c: string) => (err += c));
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    const exited = new Promise<number | null>((resolve) => read.once("close", resolve));
    read.kill("SIGINT");
    // As a user does (Ctrl-C, then quitting the pager): the reader goes away once the read has taken the interrupt.
    if (then === "goes away") {
      await waitFor(() => /record\(s\)/.test(err), 10_000, "the read to take the interrupt");
      read.stdout.destroy();
    } else read.stdout.resume();
    expect(await exited).toBe(130);
    expect(err).toMatch(/\d+ record\(s\); resume with --cursor /);
  }, 60_000);
});
