import { afterAll, beforeAll, describe, expect, test } from "vitest";
import fc from "fast-check";
import * as grpc from "@grpc/grpc-js";
import { SessionStoreService } from "../../gen/mecatl/driver/v1/session_store_pb.js";
import { EventLogService } from "../../gen/mecatl/driver/v1/event_log_pb.js";
import { SessionLeaseService } from "../../gen/mecatl/driver/v1/session_lease_pb.js";
import { callWithBytes } from "../helpers/raw-grpc.js";
import { FUZZ_BACKENDS, openFuzzSession, type FuzzSession } from "./run.js";
import { FUZZED_SERVICES, requestArb } from "./request-arbs.js";
import { definedCodes } from "./oracle.js";

/**
 * Issue 10, deliverable 5: property-based and mutation fuzzing of the request
 * bytes of every RPC, against a real server on every backend. The short run
 * here sends FUZZ_RUNS requests per backend (default 300, a few seconds);
 * `npm run fuzz` is the long run. FUZZ_SEED replays a run.
 */
const RUNS = Number(process.env.FUZZ_RUNS ?? 300);
const SEED = process.env.FUZZ_SEED === undefined ? undefined : Number(process.env.FUZZ_SEED);

test("the status table covers every method of every served service", () => {
  for (const service of FUZZED_SERVICES) for (const method of service.methods) expect(definedCodes(method).size).toBeGreaterThan(0);
});

describe.each(FUZZ_BACKENDS)("fuzzing every RPC on %s", (backend) => {
  let session: FuzzSession;
  beforeAll(async () => {
    session = await openFuzzSession(backend);
  });
  afterAll(() => session?.close());

  test.each([
    ["invalid UTF-8 in a string field", SessionStoreService.method.save, [0x0a, 0x01, 0xff], "session_id: not valid UTF-8"],
    ["invalid UTF-8 in a nested string field", SessionStoreService.method.save, [0x12, 0x03, 0x0a, 0x01, 0xff], "snapshot.format: not valid UTF-8"],
    ["a string field sent as a varint", EventLogService.method.append, [0x08, 0x05], "session_id: sent as varint, but the field is length-delimited"],
    ["a sub-message longer than the request", SessionLeaseService.method.renew, [0x0a, 0x05, 0x0a], "lease: its length runs past the end of the message"],
    ["a malformed tag", SessionStoreService.method.load, [0x80], "request: malformed field tag at byte 0"],
    ["a truncated unknown field", SessionStoreService.method.load, [0xa2, 0x06, 0x05], "request: unknown field 100 at byte 0 is malformed or truncated"],
  ])("%s is INVALID_ARGUMENT naming the field", async (_label, method, bytes, message) => {
    const client = new grpc.Client(session.server.address, grpc.credentials.createInsecure());
    try {
      const out = await callWithBytes(client, `/${method.parent.typeName}/${method.name}`, Uint8Array.from(bytes));
      expect({ code: out.code, details: out.details }).toEqual({ code: grpc.status.INVALID_ARGUMENT, details: message });
    } finally {
      client.close();
    }
  });

  test(`${RUNS} generated and mutated requests: defined codes naming the field, nothing stored by a refusal, no crash`, async () => {
    const { fuzzer } = session;
    await fc.assert(
      fc.asyncProperty(requestArb(fuzzer.pools), async (req) => {
        expect(await fuzzer.check(req)).toEqual([]);
      }),
      { numRuns: RUNS, seed: SEED },
    );
    expect(await fuzzer.checkAlive()).toBeUndefined();
  });
});
