import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Code, ConnectError, type Client } from "@connectrpc/connect";
import { ScheduleOneShotReArmerService, ScheduleStoreService } from "../../gen/mecatl/driver/v1/schedule_store_pb.js";
import { sharedConformanceBackends, type TestBackend } from "../helpers/backends.js";
import { startServer, type ServerProcess } from "../helpers/server.js";
import { grpcClient } from "../helpers/clients.js";
import { fireRecord, iso, readSchedule, scheduleRecord, T0, ts } from "../helpers/schedules.js";

const ROUNDS = 50;
const RACERS = 16;

/** Counts fulfilled calls and checks every rejection is `code`. */
function outcome(results: PromiseSettledResult<unknown>[], code: Code): number {
  for (const r of results) {
    if (r.status === "rejected") {
      expect(r.reason).toBeInstanceOf(ConnectError);
      expect(Code[(r.reason as ConnectError).code]).toBe(Code[code]);
    }
  }
  return results.filter((r) => r.status === "fulfilled").length;
}

/**
 * The at-most-once fence across processes (wire-contract.md 5.5): two server
 * processes on one store, racing claims and re-arms for the same schedule.
 */
describe.each(sharedConformanceBackends())("schedule races across two processes on $name", (backend: TestBackend) => {
  let servers: ServerProcess[] = [];
  let clients: Array<Client<typeof ScheduleStoreService>> = [];
  let rearmers: Array<Client<typeof ScheduleOneShotReArmerService>> = [];

  beforeAll(async () => {
    const { store } = await backend.setup();
    servers = await Promise.all([0, 1].map(() => startServer(["schedule-store", "--store", store])));
    clients = servers.map((s) => grpcClient(ScheduleStoreService, s.address));
    rearmers = servers.map((s) => grpcClient(ScheduleOneShotReArmerService, s.address));
  });
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop()));
    await backend.teardown();
  });

  test(`${RACERS} concurrent claims of one due slot, split over both processes: exactly one OK, ${ROUNDS} times`, async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const name = `race-claim-${round}`;
      const now = T0 + round * 60;
      await clients[round % 2]!.saveSchedule({ name, schedule: scheduleRecord({ Name: name }, { NextFireAt: iso(now), Enabled: true }) });
      const results = await Promise.allSettled(
        Array.from({ length: RACERS }, (_, i) => clients[i % 2]!.claimSchedule({ name, now: ts(now), nextFire: ts(now + 60) })),
      );
      expect(outcome(results, Code.NotFound), `round ${round}`).toBe(1);
      const st = readSchedule((await clients[0]!.loadSchedule({ name })).schedule).state;
      expect(st).toMatchObject({ FireCount: 1, LastFireAt: iso(now), NextFireAt: iso(now + 60) });
    }
  });

  test("claims and claim-nows at the same now, mixed over both processes: exactly one OK", async () => {
    for (let round = 0; round < 10; round++) {
      const name = `race-mixed-${round}`;
      await clients[0]!.saveSchedule({ name, schedule: scheduleRecord({ Name: name }, { NextFireAt: iso(T0), Enabled: true }) });
      const results = await Promise.allSettled(
        Array.from({ length: RACERS }, (_, i) =>
          i % 4 < 2
            ? clients[i % 2]!.claimSchedule({ name, now: ts(T0), nextFire: ts(T0 + 3600) })
            : clients[i % 2]!.claimScheduleNow({ name, now: ts(T0), nextFire: ts(T0 + 3600) }),
        ),
      );
      expect(outcome(results, Code.NotFound), `round ${round}`).toBe(1);
    }
  });

  test("two concurrent re-arms from the two processes add exactly 2, every time", async () => {
    const name = "race-rearm";
    await clients[0]!.saveSchedule({ name, schedule: scheduleRecord({ Name: name, OneShotRetry: true }, { NextFireAt: iso(T0), Enabled: true }) });
    for (let round = 1; round <= 20; round++) {
      await Promise.all(rearmers.map((r) => r.reArmOneShot({ name, nextFire: ts(T0 + round) })));
      expect(readSchedule((await clients[1]!.loadSchedule({ name })).schedule).state.OneShotRetryCount).toBe(2 * round);
    }
  });

  test("progress writes racing a terminal RecordFire never revert the fire to in-flight", async () => {
    const name = "race-terminal";
    await clients[0]!.saveSchedule({ name, schedule: scheduleRecord({ Name: name }, { NextFireAt: iso(T0), Enabled: true }) });
    for (let round = 0; round < 10; round++) {
      const fireId = `race-terminal-${round}`;
      const base = { ID: fireId, ScheduleName: name, SessionID: `s-${round}`, FiredAt: iso(T0), StartedAt: iso(T0 + 1) };
      await clients[0]!.recordFireStart({ name, fireId, fire: fireRecord(base) });
      const progress = Array.from({ length: 8 }, (_, i) => clients[i % 2]!.recordFireProgress({ name, fireId, at: ts(T0 + 2 + i) }));
      await Promise.all([...progress, clients[1]!.recordFire({ fireId, fire: fireRecord({ ...base, Stop: "end_turn" }) })]);
      const text = new TextDecoder().decode((await clients[0]!.loadFire({ fireId })).fire!.payload);
      expect(JSON.parse(text).Stop).toBe("end_turn");
    }
  });
});
