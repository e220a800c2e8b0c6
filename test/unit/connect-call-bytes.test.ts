import { describe, expect, test } from "vitest";
import { Code, ConnectError } from "@connectrpc/connect";
import { HELD_COPIES, InflightBudget } from "../../services/server/inflight-budget.js";
import { ConnectCallBytes } from "../../services/server/connect-call-bytes.js";

const KiB = 1024;

/** A request body that yields `sizes` chunks one by one, each once asked for, and then waits on `hold` before it ends (never, if not given). */
async function* body(sizes: number[], hold?: Promise<void>): AsyncIterable<Uint8Array> {
  for (const n of sizes) yield new Uint8Array(n);
  if (hold !== undefined) await hold;
}

/** Reads `chunks` to its end; resolves with the bytes read, or with the error it threw. */
async function readAll(chunks: AsyncIterable<Uint8Array>): Promise<number | ConnectError> {
  let n = 0;
  try {
    for await (const c of chunks) n += c.length;
    return n;
  } catch (err) {
    return ConnectError.from(err);
  }
}

/** Reads `chunks` until `bytes` have arrived, leaving the iteration open (a body still arriving). */
async function readUntil(chunks: AsyncIterator<Uint8Array>, bytes: number): Promise<void> {
  let n = 0;
  while (n < bytes) n += (await chunks.next()).value!.length;
}

/**
 * The Connect listener's charge of requests of unknown length
 * (connect-call-bytes.ts, README "--max-inflight-bytes"), over a real
 * budget: fresh-eyes findings of the tenth session.
 */
describe("a Connect request of unknown length charged as it arrives", () => {
  test("a request within a third of the budget is served though its doubling step would pass that third (it was refused)", async () => {
    // 1 MiB budget: one call may hold 349,525 bytes. 300 KiB arrives in 1 KiB chunks, so the call holds 256 KiB,
    // then asked for as much again (512 KiB), more than a call may hold.
    const budget = new InflightBudget(1024 * KiB, 2_000);
    const bytes = new ConnectCallBytes(budget);
    expect(await readAll(bytes.chargedRequest(body(Array(300).fill(KiB))))).toBe(300 * KiB);
    expect(budget.used).toBeLessThanOrEqual(budget.limitBytes);
    bytes.end();
    expect(budget.used).toBe(0);
  });

  test("a request beyond a third of the budget is refused at once, naming the bytes that arrived", async () => {
    const budget = new InflightBudget(1024 * KiB, 2_000);
    const bytes = new ConnectCallBytes(budget);
    const started = performance.now();
    const err = await readAll(bytes.chargedRequest(body(Array(400).fill(KiB))));
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).code).toBe(Code.ResourceExhausted);
    expect((err as ConnectError).rawMessage).toMatch(/this request of at least 3[45]\d{4} bytes needs .* more than all of it/);
    // Not the budget's 2 s wait: a bound on a hang, far above the time the refusal takes.
    expect(performance.now() - started).toBeLessThan(1_500);
    // Refused: its bytes are given back before its answer is written.
    expect(budget.used).toBe(0);
  });

  test("a refused request's bytes are given back at once, so its refusal is not written behind them", async () => {
    const budget = new InflightBudget(300 * KiB * HELD_COPIES, 60_000);
    const other = new ConnectCallBytes(budget);
    const refused = new ConnectCallBytes(budget);
    // The other call holds 200 KiB; this one takes 64 KiB, then needs 64 KiB more and waits for room.
    const otherChunks = other.chargedRequest(body([200 * KiB], new Promise(() => undefined)))[Symbol.asyncIterator]();
    await readUntil(otherChunks, 200 * KiB);
    const bodyError = new ConnectError("request: no bytes arrived (test)", Code.Unavailable);
    async function* stalls(): AsyncIterable<Uint8Array> {
      yield new Uint8Array(64 * KiB);
      throw bodyError;
    }
    expect(await readAll(refused.chargedRequest(stalls()))).toBe(bodyError);
    expect(budget.used).toBe(200 * KiB * HELD_COPIES);
    other.end();
    refused.end();
    expect(budget.used).toBe(0);
  });

  test("requests that hold the budget between them while each waits for more: the newest waiters are refused at once, the first waiter is served", async () => {
    // 48 MiB of budget (16 MiB of messages); four requests of 10 MiB arrive side by side in 64 KiB chunks. Each takes
    // as much again as it holds, at most 1 MiB more: at 4 MiB each they hold it all, and each waits for 1 MiB more.
    const MiB = 1024 * KiB;
    const budget = new InflightBudget(16 * MiB * HELD_COPIES, 60_000);
    const calls = [0, 1, 2, 3].map(() => new ConnectCallBytes(budget));
    const iterators = calls.map((c) => c.chargedRequest(body(Array(160).fill(64 * KiB)))[Symbol.asyncIterator]());
    const outcomes: Array<Promise<number | ConnectError>> = [];
    const started = performance.now();
    // Each reads a chunk in turn, so all four grow together until they hold the budget between them.
    const read = async (i: number) => {
      let n = 0;
      try {
        for (let r = await iterators[i]!.next(); r.done !== true; r = await iterators[i]!.next()) {
          n += r.value.length;
          await new Promise((resolve) => setImmediate(resolve));
        }
        calls[i]!.end();
        return n;
      } catch (err) {
        calls[i]!.end();
        return ConnectError.from(err);
      }
    };
    for (let i = 0; i < 4; i++) outcomes.push(read(i));
    const results = await Promise.all(outcomes);
    // Not the budget's 60 s wait: refused as soon as the waiters hold each other up.
    expect(performance.now() - started).toBeLessThan(10_000);
    const served = results.filter((r) => r === 10 * MiB);
    const refused = results.filter((r): r is ConnectError => r instanceof ConnectError);
    expect(served.length).toBeGreaterThanOrEqual(1);
    expect(served.length + refused.length).toBe(4);
    for (const err of refused) {
      expect(err.code).toBe(Code.ResourceExhausted);
      expect(err.rawMessage).toMatch(/held by requests of unknown length that each wait for more of it.*retry later, or send the request's content-length/);
    }
    expect(budget.used).toBe(0);
  });
});
