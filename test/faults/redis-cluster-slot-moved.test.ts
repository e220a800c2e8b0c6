/**
 * Reads beside a slot that just moved (found reproducing the INTERNAL Loads
 * of the failover test). When a command meets MOVED, ioredis changes the
 * node of the moved slot in the node list that every slot of its old range
 * shares, until it has read the slot map again; meanwhile an auto-pipeline
 * of reads of two neighbouring slots looks split across two nodes, and
 * ioredis refuses it before writing anything ("All keys in the pipeline
 * should belong to the same slots allocation group"). Such a refusal must be
 * retried (nothing was sent), never answered INTERNAL (wire-contract.md
 * section 1: INTERNAL is for bugs).
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { ConnectError } from "@connectrpc/connect";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { slotOfTag } from "../../services/storage/redis-layout.js";
import { DEFAULT_KEYS, fileCluster, idsInPartition } from "../helpers/backends.js";
import type { SpawnedCluster } from "../helpers/redis-cluster.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { grpcClient } from "../helpers/clients.js";

const enc = new TextEncoder();

describe("reads beside a slot that moved to another primary", () => {
  let cluster: SpawnedCluster;
  let server: ServerProcess;
  beforeAll(async () => {
    cluster = await fileCluster();
    server = await startServer(["session-store", "--store", cluster.url]);
  });
  afterAll(async () => {
    await server?.stop();
  });

  test("Loads of the neighbouring slots are answered, none INTERNAL, each time a slot moves", async () => {
    const sessions = grpcClient(SessionStoreService, server.address);
    // Partitions 0, 1 and 2 take slots 0 to 3071: one primary's range (the cluster splits 16384 slots in three).
    const slots = [0, 1, 2].map((p) => slotOfTag(DEFAULT_KEYS.layout.tag(p)));
    const home = await cluster.primaryOf(slots[0]!);
    for (const slot of slots) expect((await cluster.primaryOf(slot)).port).toBe(home.port);
    const ids = [0, 1, 2].map((p) => idsInPartition(p, `moved-${p}`, 1)[0]!);
    for (const id of ids) await sessions.save({ sessionId: id, snapshot: { format: "sessnap-json/1", payload: enc.encode(`{"id":"${id}"}`) } });

    const failures: string[] = [];
    let loads = 0;
    const others = (await cluster.primaries()).filter((n) => n.port !== home.port);
    // Move partition 0's slot away and back, each time with Loads of the three partitions in flight.
    for (const to of [others[0]!, home, others[1]!, home]) {
      let moving = true;
      const reader = async () => {
        while (moving) {
          await Promise.all(
            ids.map((id) =>
              sessions.load({ sessionId: id }).then(
                () => loads++,
                (err: unknown) => failures.push(`${id}: ${ConnectError.from(err).message}`),
              ),
            ),
          );
        }
      };
      const readers = Array.from({ length: 8 }, reader);
      await cluster.migrateSlot(slots[0]!, to);
      await new Promise((resolve) => setTimeout(resolve, 300));
      moving = false;
      await Promise.all(readers);
    }
    expect(failures).toEqual([]);
    expect(loads).toBeGreaterThan(100);
  });
});
