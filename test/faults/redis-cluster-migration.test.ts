/**
 * A slot migration under traffic (issue 13, deliverable 4): while the slot
 * of one partition moves from one primary to another, key by key (MIGRATING
 * / IMPORTING, MIGRATE in small batches, writes redirected with ASK, or
 * refused with TRYAGAIN while a write's keys are split between the two),
 * appends, saves and lease renewals on that partition go on. No answer is
 * wrong: every append answered OK is in the log exactly once and in order,
 * one answered "nothing was written" is not, no call is INTERNAL, the lease
 * keeps its token, and afterwards the new primary serves the slot.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Code, ConnectError } from "@connectrpc/connect";
import { EventLogService } from "../../gen/mecatl/driver/v1/event_log_pb.js";
import { SessionLeaseService } from "../../gen/mecatl/driver/v1/session_lease_pb.js";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { slotOfTag } from "../../services/storage/redis-layout.js";
import { DEFAULT_KEYS, fileCluster, idsInPartition } from "../helpers/backends.js";
import type { ClusterNode, SpawnedCluster } from "../helpers/redis-cluster.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { grpcClient } from "../helpers/clients.js";
import { EVENT_FORMAT, readBodies } from "../helpers/event-log.js";
import { waitFor } from "../helpers/wait.js";

const enc = new TextEncoder();

/** Runs one command on a node. */
async function command(node: ClusterNode, ...args: string[]): Promise<unknown> {
  const c = node.client();
  try {
    return await c.call(args[0]!, ...args.slice(1));
  } finally {
    c.disconnect();
  }
}

/** ASK, MOVED and TRYAGAIN error replies a node has sent since its statistics were reset (INFO errorstats). */
async function redirections(node: ClusterNode): Promise<number> {
  const info = (await command(node, "INFO", "errorstats")) as string;
  let n = 0;
  for (const m of info.matchAll(/^errorstat_(ASK|MOVED|TRYAGAIN):count=(\d+)/gm)) n += Number(m[2]);
  return n;
}

/** How a call ended: OK, UNAVAILABLE saying nothing was written, UNAVAILABLE with the outcome unknown. */
type Outcome = "ok" | "not-written" | "unknown";

function outcomeOf(err: unknown): Outcome {
  if (!(err instanceof ConnectError) || err.code !== Code.Unavailable) throw err;
  return /outcome unknown/.test(err.rawMessage) ? "unknown" : "not-written";
}

describe("a slot migrating between primaries under traffic", () => {
  let cluster: SpawnedCluster;
  let server: ServerProcess;
  beforeAll(async () => {
    cluster = await fileCluster();
    server = await startServer(["all", "--store", cluster.url, "--store-timeout", "5s"]);
  });
  afterAll(async () => {
    await server?.stop();
  });

  test("appends, saves and renewals on the moving partition get no wrong answer, exactly once", async () => {
    const events = grpcClient(EventLogService, server.address);
    const sessions = grpcClient(SessionStoreService, server.address);
    const leases = grpcClient(SessionLeaseService, server.address);
    const slot = slotOfTag(DEFAULT_KEYS.layout.tag(0));
    const from = await cluster.primaryOf(slot);
    const to = (await cluster.primaries()).find((n) => n.port !== from.port)!;

    // Enough keys in the slot that it moves in many batches.
    const filler = idsInPartition(0, "fill", 120);
    await Promise.all(filler.map((id) => sessions.save({ sessionId: id, snapshot: { format: "sessnap-json/1", payload: enc.encode(`{"id":"${id}"}`) } })));
    const logs = idsInPartition(0, "log", 3);
    const [saved] = idsInPartition(0, "saved", 1);
    const [leased] = idsInPartition(0, "leased", 1);
    let lease = (await leases.acquire({ sessionId: leased!, owner: "keeper" })).lease!;

    let stop = false;
    let calls = 0;
    const outcomes = new Map<string, Outcome>();
    const appender = async (id: string) => {
      for (let seq = 0; !stop; seq++) {
        const outcome = await events.append({ sessionId: id, event: { format: EVENT_FORMAT, payload: enc.encode(JSON.stringify({ seq })) } }).then(() => "ok" as const, outcomeOf);
        outcomes.set(`${id}/${seq}`, outcome);
        calls++;
      }
    };
    let lastSaved = -1;
    const saver = async () => {
      for (let v = 0; !stop; v++) {
        const outcome = await sessions.save({ sessionId: saved!, snapshot: { format: "sessnap-json/1", payload: enc.encode(`{"v":${v}}`) } }).then(() => "ok" as const, outcomeOf);
        if (outcome === "ok") lastSaved = v;
        calls++;
      }
    };
    const renewer = async () => {
      while (!stop) {
        lease = await leases.renew({ lease }).then((r) => r.lease!, (err: unknown) => (outcomeOf(err), lease));
        calls++;
      }
    };
    const traffic = Promise.all([...logs.map(appender), saver(), renewer()]);
    await waitFor(() => calls > 20, 30_000, "the traffic to start");
    // The calls in flight while the slot moves (five loops, each always has one).
    await Promise.all([from, to].map((n) => command(n, "CONFIG", "RESETSTAT")));
    await cluster.migrateSlot(slot, to, { batch: 20 });
    const after = calls;
    await waitFor(() => calls > after + 20, 30_000, "the traffic to go on after the move");
    stop = true;
    await traffic;
    // The traffic really met the move: the two primaries answered it with redirections.
    expect(await redirections(from) + (await redirections(to))).toBeGreaterThan(0);

    expect((await cluster.primaryOf(slot)).port).toBe(to.port);
    for (const id of logs) {
      const stored = (await readBodies(events, id)).map((b) => b.seq as number);
      // In order, each once; every OK is there; nothing said "not written" is.
      expect(stored).toEqual([...stored].sort((a, b) => a - b));
      expect(new Set(stored).size).toBe(stored.length);
      for (const [key, outcome] of outcomes) {
        if (!key.startsWith(`${id}/`)) continue;
        const seq = Number(key.slice(id.length + 1));
        if (outcome === "ok") expect(stored).toContain(seq);
        if (outcome === "not-written") expect(stored).not.toContain(seq);
      }
    }
    const value = JSON.parse(new TextDecoder().decode((await sessions.load({ sessionId: saved! })).snapshot!.payload)) as { v: number };
    expect(value.v).toBeGreaterThanOrEqual(lastSaved);
    // The lease was never lost: its holder renews it with the token it was granted.
    expect((await leases.renew({ lease })).lease!.token).toBe(1n);
    expect([...outcomes.values()].filter((o) => o === "ok").length).toBeGreaterThan(0);
  });
});
