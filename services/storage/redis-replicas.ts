import type { RedisClient } from "./redis-client.js";

/**
 * `--redis-wait-replicas` of a store (issue 13, deliverable 3): every
 * recorded write is followed by `WAIT replicas` on the connection that
 * carried it, through `writer`, a client of its own, so that a WAIT that
 * blocks (replicas slow or gone) holds up no read.
 */
export interface ReplicaWait {
  /** Replicas that must acknowledge a write before it is answered OK (1 or more). */
  readonly replicas: number;
  /** The client writes go through (same server or cluster, own connections). */
  readonly writer: RedisClient;
}

const waits = new WeakMap<RedisClient, ReplicaWait>();

/** Makes every write of `client`'s stores wait for replicas as `wait` says. */
export function setReplicaWait(client: RedisClient, wait: ReplicaWait): void {
  waits.set(client, wait);
}

/** The replica wait set on `client`, or undefined (writes are answered once the primary has them). */
export function replicaWait(client: RedisClient): ReplicaWait | undefined {
  return waits.get(client);
}
