import { ConnectError, type Client } from "@connectrpc/connect";
import { expect } from "vitest";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { EventLogService, type ReadAfterRequestSchema, type ReadAfterResponse } from "../../gen/mecatl/driver/v1/event_log_pb.js";
import { errorInfo, expectCode } from "./errors.js";
import type { Code } from "@connectrpc/connect";
import { serverMetric } from "./metrics.js";
import type { ServerProcess } from "./server.js";
import { waitFor } from "./wait.js";

/** The event format the harness writes (wire-contract.md section 3.3). */
export const EVENT_FORMAT = "eventlog-json/1";

export type EventLogClient = Client<typeof EventLogService>;

/** A ReadAfter request as the typed client takes it (any field may be left out). */
export type ReadAfterInit = MessageInitShape<typeof ReadAfterRequestSchema>;

/** A LoggedEvent whose payload is the JSON of `body`. */
export function ev(body: Record<string, unknown>) {
  return { format: EVENT_FORMAT, payload: new TextEncoder().encode(JSON.stringify(body)) };
}

/** Parses an event payload back to its JSON body. */
export function body(payload: Uint8Array | undefined): Record<string, unknown> {
  return JSON.parse(new TextDecoder().decode(payload)) as Record<string, unknown>;
}

/** Appends `{seq, text}` events in order and returns their cursors. */
export async function appendSeqs(client: EventLogClient, sessionId: string, seqs: number[], text = ""): Promise<string[]> {
  const cursors: string[] = [];
  for (const seq of seqs) cursors.push((await client.append({ sessionId, event: ev({ seq, text }) })).cursor);
  return cursors;
}

/** Drains a ReadAfter call (no follow) into an array. */
export async function readAfterAll(client: EventLogClient, req: ReadAfterInit): Promise<ReadAfterResponse[]> {
  const out: ReadAfterResponse[] = [];
  for await (const r of client.readAfter(req)) out.push(r);
  return out;
}

/** Drains a legacy Read into the parsed event bodies. */
export async function readBodies(client: EventLogClient, sessionId: string): Promise<Array<Record<string, unknown>>> {
  const out: Array<Record<string, unknown>> = [];
  for await (const r of client.read({ sessionId })) out.push(body(r.event?.payload));
  return out;
}

/** The `seq` of each response's event (gaps give undefined). */
export function seqsOf(rs: ReadAfterResponse[]): Array<number | undefined> {
  return rs.map((r) => (r.kind === "event" ? (body(r.event?.payload).seq as number) : undefined));
}

/**
 * Expects `promise` to reject with `code` and a `google.rpc.ErrorInfo` of
 * `reason` in domain `mecatl.stacklok.com` (wire-contract.md section 3.7).
 */
export async function expectReason(promise: Promise<unknown>, code: Code, reason: string): Promise<ConnectError> {
  const err = await expectCode(promise, code);
  expect(errorInfo(err)).toEqual({ reason, domain: "mecatl.stacklok.com" });
  return err;
}

/**
 * An open ReadAfter follow stream read one record at a time. `next()` resolves
 * with the next response, or rejects with the stream's error; `done()`
 * resolves true once the stream ended cleanly. `cancel()` aborts the call.
 */
export interface FollowStream {
  next(): Promise<ReadAfterResponse>;
  /** Resolves to true when the stream ends without another record. */
  ended(): Promise<boolean>;
  /** Aborts the call; resolves with the error the client saw for it (CANCELED), if any. */
  cancel(): Promise<unknown>;
}

/** Opens a follow (or any) ReadAfter call as a {@link FollowStream}. */
export function openFollow(client: EventLogClient, req: ReadAfterInit): FollowStream {
  const abort = new AbortController();
  const it = client.readAfter({ follow: true, ...req }, { signal: abort.signal })[Symbol.asyncIterator]();
  return {
    async next() {
      const r = await it.next();
      if (r.done === true) throw new Error("the follow stream ended while a record was expected");
      return r.value;
    },
    async ended() {
      const r = await it.next();
      return r.done === true;
    },
    cancel() {
      abort.abort();
      // Consume the cancellation so that an unread stream does not leave an unhandled rejection.
      return it.next().then(
        () => undefined,
        (err: unknown) => err,
      );
    },
  };
}

/** The server's count of follower parks (`mecatl_drivers_follower_parks_total`). */
const PARKS = "mecatl_drivers_follower_parks_total";

/** Waits for a follow stream to park; see {@link watchParks}. */
export interface ParkWatch {
  /** Resolves once a follower parked after {@link watchParks} was called. @throws Error naming `what` after 10 s. */
  parked(what: string): Promise<void>;
}

/**
 * Notes how many times followers of `server` (started with
 * `--metrics-listen`) have parked so far. Call it before opening a follow;
 * `parked()` then resolves once a follower has drained its log and waits at
 * the tail (issue 15: the signal instead of a sleep). The count only grows,
 * so streams ending meanwhile cannot confuse it; another follower parking
 * meanwhile could, so open one follow at a time.
 */
export async function watchParks(server: ServerProcess): Promise<ParkWatch> {
  const before = await serverMetric(server, PARKS);
  return {
    parked: (what) => waitFor(async () => (await serverMetric(server, PARKS)) > before, 10_000, `${what} to park at the tail of its log`),
  };
}

/**
 * Opens a follow from `cursor` (or the beginning) on `server` (started with
 * `--metrics-listen`) and waits until the server reports it parked at the
 * tail; returns the stream and its pending next outcome (already guarded
 * against an unhandled rejection).
 */
export async function parkedFollow(client: EventLogClient, server: ServerProcess, sessionId: string, cursor = ""): Promise<{ stream: FollowStream; outcome: Promise<ReadAfterResponse> }> {
  const parks = await watchParks(server);
  const stream = openFollow(client, { sessionId, cursor });
  const outcome = stream.next();
  outcome.catch(() => undefined);
  await parks.parked(`the follower of ${JSON.stringify(sessionId)}`);
  return { stream, outcome };
}

/** Reads `n` records from a follow stream. */
export async function take(stream: FollowStream, n: number): Promise<ReadAfterResponse[]> {
  const out: ReadAfterResponse[] = [];
  while (out.length < n) out.push(await stream.next());
  return out;
}

/** Decodes a cursor envelope the way the Go conformance suite tampers with it. */
export function decodeEnvelope(cursor: string): { v: string; s: string; g: string; p: string } {
  return JSON.parse(Buffer.from(cursor, "base64url").toString("utf8")) as { v: string; s: string; g: string; p: string };
}

/** Encodes an envelope (any JSON value) as base64url without padding. */
export function encodeEnvelope(value: unknown): string {
  return Buffer.from(typeof value === "string" ? value : JSON.stringify(value), "utf8").toString("base64url");
}
