import type { KindFormat } from "../storage/copy/kind-store.js";
import { dueIndexKey } from "./rules.js";
import { decodeState } from "./schedule.js";

/**
 * A schedule as `mecatl-drivers copy` moves it (issue 14): the Spec text
 * exactly as received, the Spec facts the rules read (`placementOwned`,
 * `maxFires` as a decimal string), and the State as the store encoded it
 * (schedule.ts `encodeState`), byte for byte.
 */
export interface ScheduleCopy {
  name: string;
  spec: string;
  placementOwned: boolean;
  maxFires: string;
  state: string;
}

/** A fire record as `copy` moves it: its id, its schedule's name and its JSON text, byte for byte. */
export interface FireCopy {
  fireId: string;
  scheduleName: string;
  payload: string;
}

/** The Due index key of a copied schedule (rules.ts `dueIndexKey`), undefined when it can never be due. */
export function copiedDueKey(s: ScheduleCopy): bigint | undefined {
  return dueIndexKey({ name: s.name, specText: s.spec, placementOwned: s.placementOwned, maxFires: BigInt(s.maxFires), state: decodeState(s.state) });
}

/** Copy format of schedules: every field in the digest; bytes are the Spec and State texts. */
export const scheduleCopyFormat: KindFormat<ScheduleCopy> = {
  kind: "schedules",
  id: (s) => s.name,
  label: (id) => id,
  count: () => 1,
  bytes: (s) => Buffer.byteLength(s.spec) + Buffer.byteLength(s.state),
  items: (s) => [[s.name, s.spec, s.placementOwned, s.maxFires, s.state]],
};

/** Copy format of fire records: every field in the digest; bytes are the record text. */
export const fireCopyFormat: KindFormat<FireCopy> = {
  kind: "fires",
  id: (f) => f.fireId,
  label: (id) => id,
  count: () => 1,
  bytes: (f) => Buffer.byteLength(f.payload),
  items: (f) => [[f.fireId, f.scheduleName, f.payload]],
};
