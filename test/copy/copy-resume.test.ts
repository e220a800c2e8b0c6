/**
 * `mecatl-drivers copy` interrupted with Ctrl-C and resumed (issue 14): the
 * first run stops after the batch it is writing (exit 130) with its
 * checkpoint in the target; a run without --resume refuses the unfinished
 * target; `--resume` continues from the checkpoint (it says how much was
 * copied before) and ends verified, with the progress record gone.
 */
import { afterAll, expect, test } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { startServer } from "../helpers/server.js";
import { finished, runCli, spawnCli } from "../helpers/cli.js";
import { waitFor } from "../helpers/wait.js";
import { writeClients } from "../helpers/durable-writes.js";
import { sessnap } from "../helpers/sessnap.js";
import { ev } from "../helpers/event-log.js";

const dir = mkdtempSync(join(tmpdir(), "mecatl-copy-resume-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The target's progress record, read as an observer would (undefined before the first checkpoint or after the end). */
function progressOf(path: string): { done: Record<string, { records: number }> } | undefined {
  try {
    const db = new Database(path, { readonly: true, fileMustExist: true });
    try {
      const row = db.prepare("SELECT state FROM copy_progress").get() as { state: string } | undefined;
      return row === undefined ? undefined : JSON.parse(row.state);
    } finally {
      db.close();
    }
  } catch {
    return undefined;
  }
}

test("Ctrl-C stops after a checkpoint; --resume continues from it and verifies", async () => {
  const from = `sqlite:${join(dir, "from.sqlite")}`;
  const toPath = join(dir, "to.sqlite");
  const server = await startServer(["--store", from]);
  const c = writeClients(server.address);
  const text = "m".repeat(16 * 1024);
  for (let i = 0; i < 400; i += 20) {
    await Promise.all(
      Array.from({ length: 20 }, async (_, j) => {
        const id = `s${String(i + j).padStart(4, "0")}`;
        await c.sessions.save({ sessionId: id, snapshot: { format: "sessnap-json/1", payload: sessnap({ id, messages: [{ role: "user", text }] }) } });
        for (let k = 0; k < 5; k++) await c.events.append({ sessionId: id, event: ev({ k }) });
      }),
    );
  }
  await server.stop();

  // 400 sessions of 16 KiB in batches of 32 KiB: about 200 batches, each a durable write and a checkpoint.
  const args = ["copy", "--from", from, "--to", `sqlite:${toPath}`, "--batch-size", "32KiB"];
  const first = spawnCli(args);
  await waitFor(() => (progressOf(toPath)?.done.sessions?.records ?? 0) > 0, 20_000, "the first checkpoint");
  first.kill("SIGINT");
  const stopped = await finished(first);
  expect(stopped.code, stopped.stderr).toBe(130);
  expect(stopped.stderr).toMatch(/copy interrupted after \d+ records; run the same command with --resume to continue/);
  const checkpoint = progressOf(toPath)!;
  expect(checkpoint.done.sessions!.records).toBeGreaterThan(0);
  expect(checkpoint.done.sessions!.records).toBeLessThan(400);

  const refused = await runCli(args);
  expect(refused.code).toBe(2);
  expect(refused.stderr).toContain("holds an unfinished copy");

  const resumed = await runCli([...args, "--resume"], { timeoutMs: 60_000 });
  expect(resumed.code, resumed.stderr).toBe(0);
  // It wrote what was left (400 sessions, 400 lineage records, 2000 events in all; at most the batch in flight again), not everything again.
  const copiedNow = Number(/: (\d+) records \(after \d+ copied before\)/.exec(resumed.stdout)?.[1]);
  const copiedBefore = Object.values(checkpoint.done).reduce((n, d) => n + d.records, 0);
  expect(copiedNow + copiedBefore).toBeLessThanOrEqual(2800 + 2);
  expect(copiedNow + copiedBefore).toBeGreaterThanOrEqual(2800);
  expect(resumed.stderr).toMatch(new RegExp(`resuming .*: ${checkpoint.done.sessions!.records} records`));
  expect(resumed.stdout).toContain("copied and verified");
  expect(resumed.stdout).toMatch(/^sessions +400 +400 .* same/m);
  expect(resumed.stdout).toMatch(/^events +2000 +2000 .* same/m);
  expect(progressOf(toPath)).toBeUndefined();

  const again = await runCli([...args, "--resume"]);
  expect(again.code).toBe(2);
  expect(again.stderr).toContain("nothing to resume");
}, 120_000);
