import { describe, expect, test } from "vitest";
import { ReplyError } from "ioredis";
import { classifyRedisError, writeRefusalCause } from "../../services/storage/redis-errors.js";
import { ReplicaShortfall } from "../../services/storage/redis-script.js";
import { SlotUnserved } from "../../services/storage/redis-cluster-durability.js";

const reply = (message: string) => new ReplyError(message);

/** The error ioredis rejects a MULTI with when Redis discarded it at EXEC: EXECABORT, with the queued commands' refusals as `previousErrors`. */
function execAbort(...previousErrors: Error[]): Error {
  const err = reply("EXECABORT Transaction discarded because of previous errors.");
  if (previousErrors.length > 0) Object.assign(err, { previousErrors });
  return err;
}

describe("what a failed Redis attempt means on a cluster (issue 13)", () => {
  test.each([
    ["TRYAGAIN (a write's keys split by a migrating slot)", reply("TRYAGAIN Multiple keys request during rehashing of slot"), { kind: "retry", sent: false }],
    ["CLUSTERDOWN", reply("CLUSTERDOWN The cluster is down"), { kind: "retry", sent: false }],
    ["a MOVED the client did not follow (one node's pipeline)", reply("MOVED 3999 127.0.0.1:20001"), { kind: "retry", sent: false }],
    ["an ASK the client did not follow", reply("ASK 3999 127.0.0.1:20001"), { kind: "retry", sent: false }],
    ["the client not ready", new Error("Cluster isn't ready and enableOfflineQueue options is false"), { kind: "retry", sent: false }],
    ["redirections given up after a TRYAGAIN", new Error("Too many Cluster redirections. Last error: ReplyError: TRYAGAIN Multiple keys request"), { kind: "retry", sent: false }],
    ["redirections given up after a lost connection (the last attempt may have run)", new Error("Too many Cluster redirections. Last error: Error: Connection is closed."), { kind: "retry", sent: true }],
    ["fewer replicas than --redis-wait-replicas (applied on the primary)", new ReplicaShortfall(0, 1, 800), { kind: "retry", sent: true }],
    ["a slot without a connected primary (refused before sending)", new SlotUnserved("no primary serves slot 7"), { kind: "retry", sent: false }],
    ["a MULTI discarded because a queued command met CLUSTERDOWN (none of it ran)", execAbort(reply("CLUSTERDOWN The cluster is down")), { kind: "retry", sent: false }],
    ["a MULTI discarded because a queued command was MOVED", execAbort(reply("MOVED 3999 127.0.0.1:20001")), { kind: "retry", sent: false }],
    ["a MULTI discarded for a reason that is a bug", execAbort(reply("ERR wrong number of arguments for 'lrange' command")), { kind: "bug" }],
    ["a MULTI discarded without the refusal ioredis keeps", execAbort(), { kind: "bug" }],
    ["a cluster client that could reach no node (the bulk reader opening mid-failover)", new Error("None of startup nodes is available"), { kind: "retry", sent: false }],
    ["a cluster client that could not learn the slot map", new Error("Failed to refresh slots cache."), { kind: "retry", sent: false }],
    ["a cluster client's connect overtaken by another connect", Object.assign(new Error("Connection is discarded because a new connection is made"), { name: "RedisError" }), { kind: "retry", sent: false }],
    ["a cluster client's connect overtaken by a close", Object.assign(new Error("Connection is aborted"), { name: "RedisError" }), { kind: "retry", sent: false }],
    ["an auto-pipeline refused before it was written, its slots mapped to two nodes mid-failover", new Error("All keys in the pipeline should belong to the same slots allocation group"), { kind: "retry", sent: false }],
    ["a pipeline of our own across slots (a mistake in this code)", new Error("All the keys in a pipeline command should belong to the same slot"), { kind: "bug" }],
  ])("%s", (_label, err, expected) => {
    expect(classifyRedisError(err)).toMatchObject(expected);
  });
});

describe("which error replies mean Redis refuses every write (health NOT_SERVING, issue 9)", () => {
  test.each([
    ["READONLY (a replica)", reply("READONLY You can't write against a read only replica."), "it is a read-only replica (READONLY)"],
    ["MISCONF for a full disk (AOF write error)", reply("MISCONF Errors writing to the AOF file: No space left on device"), "no space left on its disk (MISCONF)"],
    ["MISCONF after a failed background save", reply("MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk."), "it cannot persist writes (MISCONF)"],
    ["OOM inside a script", reply("OOM command not allowed when used memory > 'maxmemory'. script: 4e6d8fc8, on @user_script:12."), "maxmemory reached (OOM)"],
    ["NOREPLICAS", reply("NOREPLICAS Not enough good replicas to write."), "too few replicas in sync (NOREPLICAS)"],
    ["a script's own error", reply("ERR user_script:1: Script attempted to access nonexistent global variable"), undefined],
    ["a lost connection whose text names a refusal", new Error("READONLY Connection is closed."), undefined],
  ])("%s", (_label, err, expected) => {
    expect(writeRefusalCause(err)).toBe(expected);
  });
});
