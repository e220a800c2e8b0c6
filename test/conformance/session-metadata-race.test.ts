/**
 * Racing writers against a pager, on every backend (issue 12;
 * spec/session-metadata.md section 4): while Saves, Creates and Deletes land
 * in one owner's scope, every page is consistent or ABORTED, and a walk of
 * pages that is never ABORTED (one generation) neither repeats nor skips a
 * row. A quiet owner's walk is never disturbed by writes in another scope.
 */
import { beforeAll, describe, expect, test } from "vitest";
import { Code, ConnectError, type Client } from "@connectrpc/connect";
import { SessionStoreService, type SessionMetadataCursor, type SessionMetadataEntry } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { compareIdBytes } from "../../common/byte-order.js";
import { conformanceBackends, type TestBackend } from "../helpers/backends.js";
import { serveService } from "../helpers/driver-server.js";
import { sessnap } from "../helpers/sessnap.js";

const FORMAT = "sessnap-json/1";
const busy = { Issuer: "race", Subject: "busy" };
const quiet = { Issuer: "race", Subject: "quiet" };
const nanos = (t: { seconds: bigint; nanos: number } | undefined) => t!.seconds * 1_000_000_000n + BigInt(t!.nanos);

/** True when `b` comes strictly after `a` in page order (newer first, then id byte-wise). */
function after(a: SessionMetadataEntry, b: SessionMetadataEntry): boolean {
  const ta = nanos(a.modifiedAt);
  const tb = nanos(b.modifiedAt);
  return tb < ta || (tb === ta && compareIdBytes(b.sessionId, a.sessionId) > 0);
}

describe.each(conformanceBackends())("metadata pages under racing writers on $name", (backend: TestBackend) => {
  const served = serveService(backend, "session-store", SessionStoreService);
  let client: Client<typeof SessionStoreService>;
  beforeAll(() => {
    client = served.client;
  });

  const save = (id: string, owner: typeof busy) => client.save({ sessionId: id, snapshot: { format: FORMAT, payload: sessnap({ id, owner }) } });

  /**
   * Walks every page of `owner`'s scope with limit 3, checking each page.
   * Returns the ids of a walk that finished, or undefined when a page was ABORTED.
   */
  async function walk(owner: typeof busy): Promise<string[] | undefined> {
    const ids: string[] = [];
    let cursor: SessionMetadataCursor | undefined;
    let total: number | undefined;
    let previous: SessionMetadataEntry | undefined;
    do {
      let page;
      try {
        page = await client.pageMetadata({ limit: 3, cursor, ownershipEnforced: true, ownerIssuer: owner.Issuer, ownerSubject: owner.Subject });
      } catch (err) {
        expect(cursor, "the first page is never ABORTED").toBeDefined();
        expect((err as ConnectError).code).toBe(Code.Aborted);
        return undefined;
      }
      expect(page.sessions.length).toBeLessThanOrEqual(3);
      if (total !== undefined) expect(page.totalCount, "total_count is constant within one generation").toBe(total);
      total = page.totalCount;
      for (const row of page.sessions) {
        expect(row.ownerSubject).toBe(owner.Subject);
        if (previous !== undefined) expect(after(previous, row), `${row.sessionId} after ${previous.sessionId}`).toBe(true);
        previous = row;
        ids.push(row.sessionId);
      }
      cursor = page.nextCursor;
      if (cursor !== undefined) expect([cursor.sessionId, nanos(cursor.modifiedAt)]).toEqual([previous!.sessionId, nanos(previous!.modifiedAt)]);
    } while (cursor !== undefined);
    expect(new Set(ids).size, "no row twice in one generation").toBe(ids.length);
    expect(ids.length, "no row skipped in one generation").toBe(total);
    return ids;
  }

  test("every page is consistent or ABORTED; a walk within one generation neither repeats nor skips a row", async () => {
    // Each writer owns its ids, so the final set is known whatever order the server applies them in.
    const mine = [0, 1, 2, 3].map(() => new Set<string>());
    for (let i = 0; i < 12; i++) {
      await save(`busy-${i % 4}-${i}`, busy);
      mine[i % 4]!.add(`busy-${i % 4}-${i}`);
      if (i < 10) await save(`quiet-${i}`, quiet);
    }
    let writing = true;
    const writer = async (w: number) => {
      const own = mine[w]!;
      for (let n = 0; n < 40; n++) {
        const existing = [...own];
        const op = existing.length === 0 ? 0 : (n + w) % 3;
        if (op === 0) {
          const id = `busy-${w}-new-${n}`;
          own.add(id);
          await client.create({ sessionId: id, snapshot: { format: FORMAT, payload: sessnap({ id, owner: busy }) } });
        } else if (op === 1) {
          await save(existing[(n * 7) % existing.length]!, busy);
        } else {
          const id = existing[(n * 5) % existing.length]!;
          own.delete(id);
          await client.delete({ sessionId: id });
        }
      }
    };
    const writers = Promise.all([0, 1, 2, 3].map(writer)).finally(() => (writing = false));
    // A writer's failure is raised by `await writers` below, not as an unhandled rejection while the walks go on.
    writers.catch(() => undefined);
    let aborted = 0;
    let busyWalks = 0;
    let quietWalks = 0;
    const quietIds = Array.from({ length: 10 }, (_, i) => `quiet-${9 - i}`);
    while (writing) {
      const busyIds = await walk(busy);
      if (busyIds === undefined) aborted++;
      else busyWalks++;
      expect(await walk(quiet), "writes in another owner's scope never abort a walk").toEqual(quietIds);
      quietWalks++;
    }
    await writers;
    expect(aborted, "the writers invalidated some cursors").toBeGreaterThan(0);
    expect(quietWalks).toBeGreaterThan(0);
    const final = await walk(busy);
    expect(final).toBeDefined();
    expect([...final!].sort()).toEqual(mine.flatMap((m) => [...m]).sort());
    expect(busyWalks + aborted).toBeGreaterThan(0);
  });
});
