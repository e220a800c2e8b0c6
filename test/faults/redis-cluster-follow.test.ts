/**
 * Follow across a Redis Cluster (issue 13, deliverable 5): followers on one
 * server process see the appends made through another, whatever primary
 * holds each session, through sharded Pub/Sub with one subscriber
 * connection per primary (not one per follower), and go on seeing them after
 * a primary fails over and its replica takes the slots.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Code, ConnectError } from "@connectrpc/connect";
import { EventLogService } from "../../gen/mecatl/driver/v1/event_log_pb.js";
import { fileCluster } from "../helpers/backends.js";
import { sessionIdOn, type ClusterNode, type SpawnedCluster } from "../helpers/redis-cluster.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { grpcClient } from "../helpers/clients.js";
import { body, ev, parkedFollow, take, type FollowStream } from "../helpers/event-log.js";

/** Pub/Sub connections a node holds (CLIENT LIST TYPE pubsub). */
async function pubsubClients(node: ClusterNode): Promise<number> {
  const c = node.client();
  try {
    return ((await c.call("CLIENT", "LIST", "TYPE", "pubsub")) as string).split("\n").filter((l) => l.trim() !== "").length;
  } finally {
    c.disconnect();
  }
}

/**
 * Sends `send` again while it fails UNAVAILABLE, as wire-contract.md section 1
 * tells a client to, until `deadlineMs` (epoch milliseconds) has passed; then
 * the last error. Used right after a failover: on a loaded host the nodes can
 * miss the node timeout once more just after every node said
 * `cluster_state:ok`, and then every command is answered CLUSTERDOWN for a
 * few seconds, longer than one call's --store-timeout.
 */
async function untilAvailable<T>(send: () => Promise<T>, deadlineMs: number): Promise<T> {
  for (;;) {
    try {
      return await send();
    } catch (err) {
      if (!(err instanceof ConnectError) || err.code !== Code.Unavailable || Date.now() > deadlineMs) throw err;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
}

describe("follow across a Redis Cluster", () => {
  let cluster: SpawnedCluster;
  let followerSide: ServerProcess;
  let writerSide: ServerProcess;
  beforeAll(async () => {
    cluster = await fileCluster();
    [followerSide, writerSide] = await Promise.all([
      startServer(["event-log", "--store", cluster.url, "--metrics-listen", "127.0.0.1:0"]),
      startServer(["event-log", "--store", cluster.url]),
    ]);
  });
  afterAll(async () => {
    await Promise.all([followerSide?.stop(), writerSide?.stop()]);
  });

  test("followers of sessions on every primary see appends made through another process, over one subscriber connection per primary, and again after a failover", async () => {
    const follows = grpcClient(EventLogService, followerSide.address);
    const appends = grpcClient(EventLogService, writerSide.address);
    const primaries = await cluster.primaries();
    // Four sessions on each primary, two followers each: 24 followers.
    const ids: string[] = [];
    for (const p of primaries) for (let i = 0; i < 4; i++) ids.push(await sessionIdOn(cluster, p, `follow-${p.port}-${i}`));
    const streams: Array<{ id: string; stream: FollowStream }> = [];
    for (const id of ids) {
      await appends.append({ sessionId: id, event: ev({ n: 0 }) });
      for (let f = 0; f < 2; f++) {
        const { stream, outcome } = await parkedFollow(follows, followerSide, id);
        expect(body((await outcome).event?.payload).n).toBe(0);
        // Parked again at the tail, behind the first record.
        streams.push({ id, stream });
      }
    }
    const before = await Promise.all(primaries.map(pubsubClients));

    await Promise.all(ids.map((id) => appends.append({ sessionId: id, event: ev({ n: 1 }) })));
    for (const { stream } of streams) expect(body((await take(stream, 1))[0]!.event?.payload).n).toBe(1);
    // One subscriber connection per primary for this process (and none for the writer's): not one per follower.
    expect(before.every((n) => n === 1)).toBe(true);

    const [victim] = primaries;
    await victim!.kill();
    try {
      await cluster.waitHealthy(cluster.nodeTimeoutMs + 20_000);
      const moved = ids.filter((id) => id.startsWith(`follow-${victim!.port}-`));
      // The writer retries until its client has the new primary; the followers' process subscribes there again.
      // On a loaded host the cluster can fall back to CLUSTERDOWN for over 20 s after every node said ok (a CI
      // run saw appends answered UNAVAILABLE, correctly, for 22 s): what is tested is the follow once it is back.
      const deadline = Date.now() + cluster.nodeTimeoutMs + 60_000;
      await Promise.all(moved.map((id) => untilAvailable(() => appends.append({ sessionId: id, event: ev({ n: 2 }) }), deadline)));
      for (const { id, stream } of streams.filter((s) => moved.includes(s.id))) {
        expect(body((await take(stream, 1))[0]!.event?.payload).n, id).toBe(2);
      }
    } finally {
      await victim!.restart();
      await cluster.waitHealthy();
    }
    await Promise.all(streams.map((s) => s.stream.cancel()));
  }, 150_000);
});
