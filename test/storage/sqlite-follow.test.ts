import { afterEach, describe, expect, test } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { EventLogService } from "../../gen/mecatl/driver/v1/event_log_pb.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { grpcClient } from "../helpers/clients.js";
import { runCli } from "../helpers/cli.js";
import { spawnRedis } from "../helpers/redis-server.js";
import { ev, openFollow, seqsOf } from "../helpers/event-log.js";

/**
 * Cross-process follow on SQLite wakes on change (issue 11): a follower on
 * one server process receives appends another process commits to the same
 * file as soon as the file system reports the WAL changed, not on a timer.
 */
describe("follow across two server processes on one SQLite file", () => {
  const cleanups: Array<() => unknown> = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });
  async function serve(args: string[]): Promise<ServerProcess> {
    const server = await startServer(args);
    cleanups.push(() => server.stop());
    return server;
  }

  test("with the safety poll an hour apart, every append made through one process reaches a follower on the other", async () => {
    const dir = mkdtempSync(join(tmpdir(), "mecatl-follow-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const store = `sqlite:${join(dir, "store.sqlite")}`;
    const [writer, reader] = await Promise.all([serve(["event-log", "--store", store]), serve(["event-log", "--store", store, "--follow-poll-interval", "1h"])]);
    const logW = grpcClient(EventLogService, writer.address);
    const follow = openFollow(grpcClient(EventLogService, reader.address), { sessionId: "s" });
    // Each append waits for the follower to receive the one before, so every one needs a wake-up of its own.
    for (let seq = 0; seq < 30; seq++) {
      const next = follow.next();
      await logW.append({ sessionId: "s", event: ev({ seq }) });
      const got = await next;
      expect(seqsOf([got])).toEqual([seq]);
      // The first may arrive with the follower's first read; every later one, only through a wake-up.
      if (seq > 0) expect(got.live).toBe(true);
    }
    follow.cancel();
  });

  test("--follow-poll-interval is described by serve --help and refused with a Redis store", async () => {
    expect((await runCli(["serve", "--help"])).stdout).toContain("--follow-poll-interval");
    const redis = await spawnRedis();
    cleanups.push(() => redis.stop());
    const r = await runCli(["serve", "--listen", "127.0.0.1:0", "--store", redis.url, "--follow-poll-interval", "5s"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("--follow-poll-interval applies to SQLite stores only");
  });
});
