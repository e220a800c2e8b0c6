import { afterEach, describe, expect, test } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import { MAIN } from "../helpers/server.js";
import { GroupCommitLimit, GROUP_COMMIT_MAX, GROUP_COMMIT_MIN } from "../../services/storage/group-commit-limit.js";

/**
 * The SQLite writer's group commits are bounded by an adaptive limit
 * (issue 11, services/storage/group-commit-limit.ts): writes queued together
 * are committed in groups that start at 16 and double while a whole group
 * still waits, so that the first answers go back while later groups commit;
 * every write is still committed exactly once, in the order it was made.
 */
const { SqliteDatabase } = (await import(pathToFileURL(join(dirname(MAIN), "../storage/sqlite-database.js")).href)) as typeof import("../../services/storage/sqlite-database.js");

describe("SQLite group commit limit", () => {
  const cleanups: Array<() => unknown> = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  test("200 writes queued together commit as groups of 16, 32, 64 and the remaining 88, answered in order", async () => {
    const dir = mkdtempSync(join(tmpdir(), "mecatl-group-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const db = await SqliteDatabase.open({ path: join(dir, "store.sqlite") });
    cleanups.push(() => db.close());
    const commits: number[] = [];
    db.on("commit", (writes: number) => commits.push(writes));
    const answered: number[] = [];
    // Calls made in one turn reach the writer in one message: all 200 are queued when it first drains.
    await Promise.all(
      Array.from({ length: 200 }, (_, i) => db.call("lease.acquire", { sessionId: `s-${i}`, owner: "o", ttlUs: 1_000_000n }).then((r) => {
        expect(r.outcome).toBe("granted");
        answered.push(i);
      })),
    );
    expect(commits).toEqual([16, 32, 64, 88]);
    expect(answered).toEqual(Array.from({ length: 200 }, (_, i) => i));
  });

  test("the limit doubles while a whole group waits, halves when nothing does, and stays within its bounds", () => {
    const limit = new GroupCommitLimit();
    expect(limit.size).toBe(GROUP_COMMIT_MIN);
    limit.adapt(GROUP_COMMIT_MIN - 1);
    expect(limit.size).toBe(GROUP_COMMIT_MIN);
    limit.adapt(0);
    expect(limit.size).toBe(GROUP_COMMIT_MIN);
    limit.adapt(GROUP_COMMIT_MIN);
    expect(limit.size).toBe(2 * GROUP_COMMIT_MIN);
    limit.adapt(GROUP_COMMIT_MIN);
    expect(limit.size).toBe(2 * GROUP_COMMIT_MIN);
    for (let i = 0; i < 20; i++) limit.adapt(1_000_000);
    expect(limit.size).toBe(GROUP_COMMIT_MAX);
    limit.adapt(0);
    expect(limit.size).toBe(GROUP_COMMIT_MAX / 2);
    for (let i = 0; i < 20; i++) limit.adapt(0);
    expect(limit.size).toBe(GROUP_COMMIT_MIN);
  });
});
