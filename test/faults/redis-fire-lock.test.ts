/**
 * The two-phase commit of fire mutations on Redis (services/schedule-store/
 * redis-fire.ts), after a process died half-way: a lock left on a fire
 * record is settled by the next caller once expired, rolled forward when
 * the schedule's fence holds a commit and back when it does not; a commit
 * arriving after it was given up writes nothing; a live lock makes reads
 * wait. The half-done states are written with raw commands, as a process
 * killed between two steps leaves them.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { Redis } from "ioredis";
import { ScheduleStoreService } from "../../gen/mecatl/driver/v1/schedule_store_pb.js";
import { RedisKeys, fireIndexMember } from "../../services/storage/redis-keys.js";
import { RedisOperations } from "../../services/storage/redis-operation.js";
import { CommitPlan } from "../../services/schedule-store/redis-commit.js";
import { spawnRedis, type SpawnedRedis } from "../helpers/redis-server.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { grpcClient } from "../helpers/clients.js";
import { fireRecord, iso, readFire, scheduleRecord, T0 } from "../helpers/schedules.js";

const keys = new RedisKeys("mecatl-drivers:");
const dec = new TextDecoder();
const DEAD_OP = "00000000deadbeef";

/** A fire record's text as the harness sends it. */
function fireText(init: Parameters<typeof fireRecord>[0]): string {
  return dec.decode(fireRecord(init).payload);
}

describe("fire mutations after a process died half-way (Redis)", () => {
  let redis: SpawnedRedis;
  let c: Redis;
  let server: ServerProcess;
  let client: ReturnType<typeof grpcClient<typeof ScheduleStoreService>>;

  beforeAll(async () => {
    redis = await spawnRedis();
    c = redis.client();
    server = await startServer(["schedule-store", "--store", redis.url, "--store-timeout", "1s"]);
    client = grpcClient(ScheduleStoreService, server.address);
    for (const name of ["sched-a", "sched-b"]) await client.saveSchedule({ name, schedule: scheduleRecord({ Name: name }) });
  });
  afterAll(async () => {
    await server?.stop();
    c?.disconnect();
    await redis?.stop();
  });

  /** Leaves `fireId` locked by {@link DEAD_OP} on behalf of `schedule`, expiring `inMs` from now (negative: expired). */
  async function deadLock(fireId: string, schedule: string, inMs: number): Promise<void> {
    const [seconds, micros] = await c.time();
    const nowMs = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    await c.hset(keys.scheduleFire(fireId), "lk", DEAD_OP, "lkt", String(nowMs + inMs), "lks", schedule, "lkm", "");
  }

  test("an expired lock whose schedule commit landed is rolled forward by the next read", async () => {
    await client.recordFire({ fireId: "fwd", fire: fireRecord({ ID: "fwd", ScheduleName: "sched-a", SessionID: "s1" }) });
    const next = fireText({ ID: "fwd", ScheduleName: "sched-b", SessionID: "s2", Stop: "done" });
    await deadLock("fwd", "sched-b", -1);
    const fence = keys.scheduleFence("sched-b", DEAD_OP);
    await c.set(fence, JSON.stringify({ p: next, r: fireIndexMember("sched-a", "fwd"), a: fireIndexMember("sched-b", "fwd") }));

    expect(readFire((await client.loadFire({ fireId: "fwd" })).fire).text).toBe(next);
    expect(await c.hmget(keys.scheduleFire("fwd"), "lk", "payload")).toEqual([null, next]);
    expect(await c.exists(fence)).toBe(0);
    expect((await client.listFires({ scheduleName: "sched-b" })).fires.map((f) => readFire(f).ID)).toEqual(["fwd"]);
    expect((await client.listFires({ scheduleName: "sched-a" })).fires).toEqual([]);
  });

  test("an expired lock without a commit is rolled back, and that operation's late commit then writes nothing", async () => {
    const before = fireText({ ID: "back", ScheduleName: "sched-a", SessionID: "s1" });
    await client.recordFire({ fireId: "back", fire: fireRecord({ ID: "back", ScheduleName: "sched-a", SessionID: "s1" }) });
    await deadLock("back", "sched-a", -1);

    expect(readFire((await client.loadFire({ fireId: "back" })).fire).text).toBe(before);
    const fence = keys.scheduleFence("sched-a", DEAD_OP);
    expect(await c.get(fence)).toBe("a");
    expect(await c.pttl(fence)).toBeGreaterThan(0);

    // The dead operation's commit, arriving late: refused by the fence, nothing written.
    const ops = new RedisOperations(c, 2000);
    const op = ops.begin();
    const plan = new CommitPlan().absent(fence).write("HSET", keys.schedule("sched-a"), "state", "{}");
    expect(await plan.commit(op, op.record(keys.scheduleOp("sched-a", DEAD_OP)), "{}")).toBe("fenced");
    expect(await c.hget(keys.schedule("sched-a"), "state")).not.toBe("{}");
  });

  test("a mutation meeting an expired committed lock applies it first, then its own change", async () => {
    await client.recordFireStart({ name: "sched-a", fireId: "both", fire: fireRecord({ ID: "both", ScheduleName: "sched-a", SessionID: "s1", StartedAt: iso(T0) }) });
    const committed = fireText({ ID: "both", ScheduleName: "sched-a", SessionID: "s1", StartedAt: iso(T0), ProgressAt: iso(T0 + 5) });
    await deadLock("both", "sched-a", -1);
    await c.set(keys.scheduleFence("sched-a", DEAD_OP), JSON.stringify({ p: committed, r: "", a: fireIndexMember("sched-a", "both") }));

    await client.recordFireProgress({ name: "sched-a", fireId: "both", at: { seconds: BigInt(T0 + 9), nanos: 0 } });
    const fire = readFire((await client.loadFire({ fireId: "both" })).fire);
    // The dead operation's progress (T0 + 5) landed first; this one's (T0 + 9) advanced it.
    expect(fire.ProgressAt).toBe(iso(T0 + 9));
  });

  test("a read waits while a live lock is held, and settles it once it expires", async () => {
    await client.recordFire({ fireId: "live", fire: fireRecord({ ID: "live", ScheduleName: "sched-a", SessionID: "s1" }) });
    const started = Date.now();
    await deadLock("live", "sched-a", 600);
    // --store-timeout 1s: the read waits out the 600 ms lock, then rolls it back.
    expect(readFire((await client.loadFire({ fireId: "live" })).fire).SessionID).toBe("s1");
    expect(Date.now() - started).toBeGreaterThanOrEqual(550);
    expect(await c.hget(keys.scheduleFire("live"), "lk")).toBeNull();
  });
});
