import { create, isMessage, toBinary, type DescMessage, type MessageInitShape, type MessageShape } from "@bufbuild/protobuf";
import { WireType } from "@bufbuild/protobuf/wire";
import { Code, ConnectError } from "@connectrpc/connect";
import { AnswerBytes, encodedAnswer } from "./encoded-answer.js";
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
 * The answer of an RPC whose answer is one repeated message field numbered
 * below 16 (List, ListSchedules, DueSchedules, ListFires; issue 10), built
 * within its budget: each entry is encoded as the store yields it and only
 * its wire bytes (tag, length prefix, entry) are kept ({@link AnswerBytes}),
 * and reading stops the moment the answer would exceed `limitBytes`. A call
 * therefore holds at most the limit (64 MiB by default, the harness's message
 * limit, wire-contract.md section 1) of encoded answer plus one store page,
 * whatever the store holds, and no object per entry (bench/RESULTS.md
 * "Bounded answers"). The answer encodes byte for byte as protobuf-es
 * encodes the same entries ({@link encodedAnswer}).
 *
 * @param answer the answer's message type; its only field is a repeated field of `entry`.
 * @param entry the entries' message type.
 * @param entries the answer's entries in answer order (messages or their init shapes), read lazily (see services/storage/index-scan.ts).
 * @param subject names the RPC and its entries in the refusal.
 * @param signal the call's signal: once aborted, reading stops.
 * @param limitBytes the most bytes the encoded answer may hold.
 * @returns the answer, which encodes to at most `limitBytes`.
 * @throws ConnectError RESOURCE_EXHAUSTED when the entries do not fit, naming
 *   the entries that fit, the store's count (when `subject.total` is given)
 *   and the limit in bytes; CANCELLED when `signal` aborts first.
 * @throws Error when `answer` is not such a message (a programming error).
 */
export async function encodeAnswer<Answer extends DescMessage, Entry extends DescMessage>(
  answer: Answer,
  entry: Entry,
  entries: AsyncIterable<MessageInitShape<Entry>>,
  subject: AnswerSubject,
  signal?: AbortSignal,
  limitBytes = HARNESS_MESSAGE_BYTES,
): Promise<MessageShape<Answer>> {
  const field = answer.fields[0];
  if (answer.fields.length !== 1 || field?.fieldKind !== "list" || field.listKind !== "message" || field.message.typeName !== entry.typeName || field.number >= 16) {
    throw new Error(`${answer.typeName} is not an answer of one repeated ${entry.typeName} field numbered below 16`);
  }
  const tag = (field.number << 3) | WireType.LengthDelimited;
  const bytes = new AnswerBytes();
  let count = 0;
  for await (const e of entries) {
    if (signal?.aborted) throw new ConnectError(`${subject.rpc}: the call was cancelled`, Code.Canceled);
    const encoded = toBinary(entry, isMessage(e, entry) ? e : create(entry, e));
    const next = delimitedFieldBytes(encoded.byteLength);
    if (bytes.length + next > limitBytes) throw await refusal(subject, count, bytes.length, next, limitBytes);
    bytes.varint(tag);
    bytes.varint(encoded.byteLength);
    bytes.write(encoded);
    count++;
  }
  return encodedAnswer(answer, field.number, bytes.finish());
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
