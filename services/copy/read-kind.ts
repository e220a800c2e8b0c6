import type { CopyKind, KindStore } from "../storage/copy/kind-store.js";
import { READ_GROUP, READS_IN_FLIGHT } from "./copy-formats.js";

/** Where reading a kind starts: at `id`, from `after` (the `next` of its last chunk read), or past `id` when `after` is undefined. */
export interface ReadStart {
  id: string;
  after: number | undefined;
}

/** One record read, with its id, the `next` to read that id again from (undefined: the id is done), and how many ids are done once it is. */
export interface ReadRecord {
  id: string;
  record: unknown;
  next: number | undefined;
  idsDone: number;
}

/** Index of the first id in sorted `ids` that is not before `id` (binary search). */
function lowerBound(ids: readonly string[], id: string): number {
  let lo = 0;
  let hi = ids.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (ids[mid]! < id) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * Reads every record of `ids` (sorted) from `store`, in (id, position)
 * order, from `start` on (issue 14: a resumed copy starts where its last
 * checkpoint was). Up to {@link READS_IN_FLIGHT} read calls of
 * `READ_GROUP[kind]` ids run ahead of the one being consumed; the further
 * chunks of a long event log are read one after another, before the next id
 * is yielded, so the order holds and memory stays bounded (a few MiB per
 * call in flight).
 *
 * @throws whatever the store's reads throw.
 */
export async function* readKind(kind: CopyKind, store: KindStore<unknown>, ids: readonly string[], start?: ReadStart): AsyncGenerator<ReadRecord> {
  let index = start === undefined ? 0 : lowerBound(ids, start.id);
  const resumeAfter = start !== undefined && ids[index] === start.id ? start.after : 0;
  if (resumeAfter === undefined) index++;
  const group = READ_GROUP[kind];
  const inFlight: Array<{ first: number; ids: string[]; answers: ReturnType<KindStore<unknown>["read"]> }> = [];
  const fill = () => {
    while (inFlight.length < READS_IN_FLIGHT && index < ids.length) {
      const first = index;
      const slice = ids.slice(index, index + group);
      index += slice.length;
      const requests = slice.map((id) => ({ id, after: id === start?.id ? (resumeAfter ?? 0) : 0 }));
      inFlight.push({ first, ids: slice, answers: store.read(requests) });
    }
  };
  fill();
  while (inFlight.length > 0) {
    const call = inFlight.shift()!;
    const answers = await call.answers;
    fill();
    for (let i = 0; i < call.ids.length; i++) {
      const id = call.ids[i]!;
      let answer = answers[i]!;
      for (;;) {
        if (answer.record !== undefined) yield { id, record: answer.record, next: answer.next, idsDone: call.first + i + (answer.next === undefined ? 1 : 0) };
        if (answer.next === undefined) break;
        answer = (await store.read([{ id, after: answer.next }]))[0]!;
      }
    }
  }
}
