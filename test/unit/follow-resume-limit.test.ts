import { describe, expect, test } from "vitest";
import { Code } from "@connectrpc/connect";
import { followResuming } from "../../clients/event-log-resume.js";
import { InfrastructureError } from "../../clients/errors.js";
import type { CursorRecord, EventLogClient, ReadAfterOptions } from "../../clients/event-log-client.js";

/**
 * The limit rule of followResuming (clients/event-log-resume.ts) at the one
 * moment an end-to-end test cannot aim at: a stream cut after the last record
 * the limit allows but before its clean end. A reopen would ask for limit 0,
 * which means no limit (wire-contract.md section 3.6). The log here is a
 * stand-in for EventLogClient.readAfter that delivers `perStream` records
 * after the cursor (fewer when the call's limit is smaller) and then fails
 * UNAVAILABLE, as a connection cut does.
 */
function cutLog(perStream: number): { log: EventLogClient; calls: ReadAfterOptions[] } {
  const calls: ReadAfterOptions[] = [];
  const log = {
    async *readAfter(_sessionId: string, options: ReadAfterOptions): AsyncGenerator<CursorRecord, void, undefined> {
      calls.push({ cursor: options.cursor, limit: options.limit });
      const after = options.cursor === "" || options.cursor === undefined ? 0 : Number(options.cursor);
      const count = options.limit ? Math.min(perStream, options.limit) : perStream;
      for (let p = after + 1; p <= after + count; p++) yield { kind: "event", payload: new Uint8Array([p]), cursor: String(p), live: true };
      throw new InfrastructureError("EventLogService/ReadAfter failed: Unavailable: http/2 stream closed with error code CANCEL (0x8)", "EventLogService/ReadAfter", Code.Unavailable);
    },
  } as unknown as EventLogClient;
  return { log, calls };
}

describe("followResuming with a limit", () => {
  test("a cut right after the last record the limit allows ends the follow: no reopen without a limit", async () => {
    const { log, calls } = cutLog(3);
    const got: string[] = [];
    for await (const r of followResuming(log, "s", { limit: 3 })) got.push(r.cursor);
    expect(got).toEqual(["1", "2", "3"]);
    expect(calls).toEqual([{ cursor: "", limit: 3 }]);
  });

  test("a cut before the limit reopens after the last record with what is left of the limit", async () => {
    const { log, calls } = cutLog(2);
    const got: string[] = [];
    for await (const r of followResuming(log, "s", { limit: 5 })) got.push(r.cursor);
    expect(got).toEqual(["1", "2", "3", "4", "5"]);
    expect(calls).toEqual([
      { cursor: "", limit: 5 },
      { cursor: "2", limit: 3 },
      { cursor: "4", limit: 1 },
    ]);
  });
});
