import { COPY_KINDS, type CopyKind } from "../storage/copy/kind-store.js";
import { MultisetDigest } from "../storage/copy/canonical.js";
import type { CopyEndpoint } from "./copy-endpoint.js";
import { COPY_FORMATS } from "./copy-formats.js";
import { readKind } from "./read-kind.js";

/** One side's figures for a kind: ids, records (events counted one by one) and the digest of their canonical forms. */
export interface SideFigures {
  ids: number;
  records: number;
  /** 64 hex characters (services/storage/copy/canonical.ts MultisetDigest). */
  digest: string;
}

/** How the two sides of a copy compare on one kind. */
export interface KindVerdict {
  kind: CopyKind;
  source: SideFigures;
  target: SideFigures;
  /** True when both sides hold exactly the same records. */
  same: boolean;
  /** Ids whose records differ (up to {@link MAX_LISTED} of them, as the kind's format labels them), with what differs. */
  differences: Array<{ id: string; what: "missing in the target" | "only in the target" | "different content" }>;
  /** Number of differing ids in all. */
  differing: number;
}

/** Differing ids a verdict names per kind. */
export const MAX_LISTED = 10;

/** Progress of a verification: ids of `kind` digested on `side` so far. */
export interface VerifyProgress {
  kind: CopyKind;
  side: "source" | "target";
  idsDone: number;
  ids: number;
}

/** Per id: the digest of its records' items, and how many records it holds. */
type IdDigests = Map<string, { digest: MultisetDigest; records: number }>;

async function digestSide(endpoint: CopyEndpoint, kind: CopyKind, side: VerifyProgress["side"], onProgress?: (p: VerifyProgress) => void): Promise<IdDigests> {
  const format = COPY_FORMATS[kind];
  const ids = (await endpoint.kinds[kind].ids()).sort();
  const out: IdDigests = new Map();
  let reported = 0;
  for await (const r of readKind(kind, endpoint.kinds[kind], ids)) {
    let entry = out.get(r.id);
    if (entry === undefined) out.set(r.id, (entry = { digest: new MultisetDigest(), records: 0 }));
    for (const item of format.items(r.record)) entry.digest.add(item);
    entry.records += format.count(r.record);
    if (onProgress !== undefined && (r.idsDone - reported >= 1000 || r.idsDone === ids.length)) {
      reported = r.idsDone;
      onProgress({ kind, side, idsDone: r.idsDone, ids: ids.length });
    }
  }
  return out;
}

function figures(digests: IdDigests): SideFigures {
  const total = new MultisetDigest();
  let records = 0;
  for (const d of digests.values()) {
    total.merge(d.digest);
    records += d.records;
  }
  return { ids: digests.size, records, digest: total.hex() };
}

/**
 * Compares one kind on both sides (issue 14: "verifies at the end"): reads
 * every record of the kind from the source and the target (both at once),
 * digests each id's records in their canonical form (the service's
 * {@link COPY_FORMATS}), and compares id by id, so a difference is named,
 * not only detected.
 *
 * @throws whatever the stores' reads throw.
 */
export async function verifyKind(source: CopyEndpoint, target: CopyEndpoint, kind: CopyKind, onProgress?: (p: VerifyProgress) => void): Promise<KindVerdict> {
  const [src, dst] = await Promise.all([digestSide(source, kind, "source", onProgress), digestSide(target, kind, "target", onProgress)]);
  const differences: KindVerdict["differences"] = [];
  let differing = 0;
  const note = (id: string, what: KindVerdict["differences"][number]["what"]) => {
    differing++;
    if (differences.length < MAX_LISTED) differences.push({ id: COPY_FORMATS[kind].label(id), what });
  };
  for (const [id, d] of src) {
    const other = dst.get(id);
    if (other === undefined) note(id, "missing in the target");
    else if (!other.digest.equals(d.digest)) note(id, "different content");
  }
  for (const id of dst.keys()) if (!src.has(id)) note(id, "only in the target");
  return { kind, source: figures(src), target: figures(dst), same: differing === 0, differences, differing };
}

/** {@link verifyKind} for every kind, in copy order. */
export async function verifyStores(source: CopyEndpoint, target: CopyEndpoint, onProgress?: (p: VerifyProgress) => void): Promise<KindVerdict[]> {
  const verdicts: KindVerdict[] = [];
  for (const kind of COPY_KINDS) verdicts.push(await verifyKind(source, target, kind, onProgress));
  return verdicts;
}
