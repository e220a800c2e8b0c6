import { Code, ConnectError } from "@connectrpc/connect";
import { delimitedFieldBytes, HARNESS_MESSAGE_BYTES } from "./message-size.js";

/** What a bounded answer lists, for the message of a refusal. */
export interface AnswerSubject {
  /** The RPC, e.g. `ListSchedules`. */
  rpc: string;
  /** The entries, plural, e.g. `schedules`. */
  noun: string;
  /** How many entries the store holds (a cheap count), when the store can tell. */
  total?: () => Promise<number>;
}

/**
 * The answer budget of an RPC whose answer is one repeated message field
 * numbered below 16 (List, ListSchedules, DueSchedules, ListFires; issue 10):
 * collects `entries` as the store yields them, adding each entry's encoded
 * size plus its tag and length prefix, and stops reading the moment the
 * answer would exceed `limitBytes`. The answer is never built past the limit,
 * so a call holds at most the limit (64 MiB by default, the harness's
 * message limit, wire-contract.md section 1) plus one store page, whatever
 * the store holds.
 *
 * @param entries the answer's entries in answer order, read lazily (see services/storage/index-scan.ts).
 * @param entryBytes encoded size in bytes of one entry message, without its tag and length prefix.
 * @param subject names the RPC and its entries in the refusal.
 * @param signal the call's signal: once aborted, reading stops.
 * @param limitBytes the most bytes the encoded answer may hold.
 * @returns the entries, which encode to at most `limitBytes`.
 * @throws ConnectError RESOURCE_EXHAUSTED when they do not fit, naming the
 *   entries that fit, the store's count (when `subject.total` is given) and
 *   the limit in bytes; CANCELLED when `signal` aborts first.
 */
export async function collectAnswer<T>(entries: AsyncIterable<T>, entryBytes: (entry: T) => number, subject: AnswerSubject, signal?: AbortSignal, limitBytes = HARNESS_MESSAGE_BYTES): Promise<T[]> {
  const answer: T[] = [];
  let used = 0;
  for await (const entry of entries) {
    if (signal?.aborted) throw new ConnectError(`${subject.rpc}: the call was cancelled`, Code.Canceled);
    const bytes = delimitedFieldBytes(entryBytes(entry));
    if (used + bytes > limitBytes) throw await refusal(subject, answer.length, used, bytes, limitBytes);
    used += bytes;
    answer.push(entry);
  }
  return answer;
}

async function refusal(subject: AnswerSubject, fitted: number, used: number, next: number, limitBytes: number): Promise<ConnectError> {
  // The count only adds to the message; a store that cannot count now does not hide the refusal.
  const total = await subject.total?.().catch(() => undefined);
  const held = total === undefined ? "" : `; the store holds ${total} ${subject.noun}`;
  return new ConnectError(
    `${subject.rpc}: the answer does not fit the ${limitBytes}-byte message limit: ${fitted} ${subject.noun} (${used} bytes) were read before the next one (${next} bytes) would exceed it${held}; nothing is returned`,
    Code.ResourceExhausted,
  );
}

/**
 * Encoded size in bytes of a `{1: format string, 2: payload bytes}` record
 * (ScheduleRecord, ScheduleFireRecord, SessionSnapshot), computed without
 * encoding it; an empty field is not encoded (proto3).
 */
export function recordBytes(record: { format: string; payload: Uint8Array }): number {
  const formatBytes = Buffer.byteLength(record.format, "utf8");
  return (formatBytes === 0 ? 0 : delimitedFieldBytes(formatBytes)) + (record.payload.byteLength === 0 ? 0 : delimitedFieldBytes(record.payload.byteLength));
}
