import { COPY_KINDS, type CopyKind } from "../storage/copy/kind-store.js";
import type { CopyEndpoint } from "./copy-endpoint.js";
import { COPY_FORMATS } from "./copy-formats.js";
import { readKind, type ReadStart } from "./read-kind.js";
import { verifyStores, type KindVerdict, type VerifyProgress } from "./verify.js";

/** Records and payload bytes copied of one kind. */
export interface CopyTotals {
  records: number;
  bytes: number;
}

/**
 * The progress record an unfinished copy keeps in its target (issue 14:
 * "interrupted and resumed"), as JSON: where the source is, whether the
 * records are all copied (then only the verification remains), the last
 * checkpoint (the kind being copied and, within it, the last id written and
 * where to read that id on from), and what was copied so far.
 */
export interface CopyProgressRecord {
  version: 1;
  source: string;
  phase: "copying" | "copied";
  kind: CopyKind;
  at?: ReadStart;
  done: Record<CopyKind, CopyTotals>;
}

/** Progress of the copying phase, reported after every batch and when a kind starts. */
export interface CopyProgress {
  kind: CopyKind;
  /** Ids of the kind in the source (sessions, logs, lease records, ...), and how many are done. */
  ids: number;
  idsDone: number;
  /** Copied so far, counting earlier runs of a resumed copy. */
  done: CopyTotals;
}

/** Options for {@link copyStore}. */
export interface CopyOptions {
  /** Erase whatever the target holds first (`--replace`). */
  replace: boolean;
  /** Continue the unfinished copy recorded in the target (`--resume`). */
  resume: boolean;
  /** A batch is written once it carries this many payload bytes... */
  batchBytes: number;
  /** ...or this many records. */
  batchRecords: number;
  /** Aborts the copy after the batch being written (Ctrl-C). */
  signal?: AbortSignal;
  onCopy?: (p: CopyProgress) => void;
  /** Told once every record is copied, before the verification starts. */
  onCopied?: () => void;
  onVerify?: (p: VerifyProgress) => void;
  /** Told when the copy starts: `resumed` from a checkpoint (with what was already done), or `fresh`. */
  onStart?: (how: { resumed: boolean; done: Record<CopyKind, CopyTotals> }) => void;
}

/** A copy that could not start: a non-empty target, nothing to resume, another source's unfinished copy. The message says what to do. */
export class CopyRefused extends Error {
  override name = "CopyRefused";
}

/** A copy stopped by {@link CopyOptions.signal}; its progress record lets `--resume` continue it. */
export class CopyInterrupted extends Error {
  override name = "CopyInterrupted";
  constructor(readonly done: Record<CopyKind, CopyTotals>) {
    super("copy interrupted");
  }
}

function zeroTotals(): Record<CopyKind, CopyTotals> {
  return Object.fromEntries(COPY_KINDS.map((k) => [k, { records: 0, bytes: 0 }])) as Record<CopyKind, CopyTotals>;
}

/**
 * What the target holds, as ids per kind (sessions, lineage records, event
 * logs, lease records, schedules, fire records); "non-empty" means any of
 * them is not zero. A deleted session's log (no records, no generation) and
 * the store's own housekeeping (schema, metadata configuration, operation
 * records) do not count.
 */
export async function storeContents(endpoint: CopyEndpoint): Promise<Record<CopyKind, number>> {
  const counts = await Promise.all(COPY_KINDS.map(async (k) => [k, (await endpoint.kinds[k].ids()).length] as const));
  return Object.fromEntries(counts) as Record<CopyKind, number>;
}

function describeContents(counts: Record<CopyKind, number>): string {
  const names: Record<CopyKind, string> = { sessions: "sessions", lineage: "lineage records", events: "event logs", leases: "lease records", schedules: "schedules", fires: "fire records" };
  return COPY_KINDS.filter((k) => counts[k] > 0)
    .map((k) => `${counts[k]} ${names[k]}`)
    .join(", ");
}

/**
 * Finds where to start: a fresh copy (after checking the target is empty,
 * or erasing it with `replace`), or the checkpoint of an unfinished one.
 *
 * @throws CopyRefused when the target is not empty, holds another copy's
 *   progress, or (`resume`) holds none of this source.
 */
async function begin(source: CopyEndpoint, target: CopyEndpoint, options: CopyOptions): Promise<CopyProgressRecord> {
  const stored = await target.readProgress();
  const progress = stored === undefined ? undefined : (JSON.parse(stored) as CopyProgressRecord);
  if (options.resume) {
    if (progress === undefined) throw new CopyRefused(`nothing to resume: ${target.description} holds no unfinished copy; run the command without --resume`);
    if (progress.source !== source.description) {
      throw new CopyRefused(`the unfinished copy into ${target.description} is from ${progress.source}, not ${source.description}; resume it with that --from, or pass --replace instead of --resume to start over`);
    }
    return progress;
  }
  if (options.replace) await target.erase();
  else {
    if (progress !== undefined) throw new CopyRefused(`${target.description} holds an unfinished copy from ${progress.source}; add --resume to continue it, or --replace to erase the target and start over`);
    const held = await storeContents(target);
    if (Object.values(held).some((n) => n > 0)) {
      throw new CopyRefused(`${target.description} is not empty (it holds ${describeContents(held)}); copy into an empty store, or pass --replace to erase everything it holds first`);
    }
  }
  const fresh: CopyProgressRecord = { version: 1, source: source.description, phase: "copying", kind: COPY_KINDS[0], done: zeroTotals() };
  await target.writeProgress(JSON.stringify(fresh));
  return fresh;
}

/**
 * Copies one kind from `progress.at` on, batch by batch; after each batch
 * is written (durably) the checkpoint is stored in the target, then the
 * interrupt signal is checked.
 */
async function copyKind(kind: CopyKind, source: CopyEndpoint, target: CopyEndpoint, progress: CopyProgressRecord, options: CopyOptions): Promise<void> {
  const format = COPY_FORMATS[kind];
  const ids = (await source.kinds[kind].ids()).sort();
  const done = progress.done[kind];
  let batch: unknown[] = [];
  let batchBytes = 0;
  let batchRecords = 0;
  let last: ReadStart | undefined;
  let idsDone = 0;
  const flush = async () => {
    if (batch.length === 0) return;
    await target.kinds[kind].write(batch);
    done.records += batchRecords;
    done.bytes += batchBytes;
    progress.at = last;
    await target.writeProgress(JSON.stringify(progress));
    options.onCopy?.({ kind, ids: ids.length, idsDone, done });
    batch = [];
    batchBytes = batchRecords = 0;
    if (options.signal?.aborted) throw new CopyInterrupted(progress.done);
  };
  options.onCopy?.({ kind, ids: ids.length, idsDone: 0, done });
  for await (const r of readKind(kind, source.kinds[kind], ids, progress.at)) {
    batch.push(r.record);
    batchBytes += format.bytes(r.record);
    batchRecords += format.count(r.record);
    last = { id: r.id, after: r.next };
    idsDone = r.idsDone;
    if (batchBytes >= options.batchBytes || batchRecords >= options.batchRecords) await flush();
  }
  idsDone = ids.length;
  await flush();
  options.onCopy?.({ kind, ids: ids.length, idsDone, done });
}

/**
 * `mecatl-drivers copy` (issue 14): copies everything `source` holds into
 * `target` through the backend-neutral export/import interface
 * (services/storage/copy/kind-store.ts), kind by kind in
 * {@link COPY_KINDS} order, in batches of about `batchBytes`, keeping a
 * checkpoint in the target after every batch; then verifies both sides
 * (counts and content digests per kind, id by id) and, when they match,
 * removes the progress record. Returns the verdicts (the copy succeeded
 * when every one is `same`) and what was copied, earlier runs of a resumed
 * copy included.
 *
 * @throws CopyRefused before anything is written (non-empty target, nothing
 *   to resume, another source's copy); CopyInterrupted when the signal
 *   aborted it (resume with `resume`); the stores' errors.
 */
export async function copyStore(source: CopyEndpoint, target: CopyEndpoint, options: CopyOptions): Promise<{ verdicts: KindVerdict[]; done: Record<CopyKind, CopyTotals> }> {
  const progress = await begin(source, target, options);
  options.onStart?.({ resumed: options.resume, done: progress.done });
  if (progress.phase === "copying") {
    for (const kind of COPY_KINDS.slice(COPY_KINDS.indexOf(progress.kind))) {
      if (options.signal?.aborted) throw new CopyInterrupted(progress.done);
      if (progress.kind !== kind) {
        progress.kind = kind;
        progress.at = undefined;
      }
      await copyKind(kind, source, target, progress, options);
    }
    progress.phase = "copied";
    progress.at = undefined;
    await target.writeProgress(JSON.stringify(progress));
  }
  options.onCopied?.();
  const verdicts = await verifyStores(source, target, options.onVerify);
  if (verdicts.every((v) => v.same)) await target.clearProgress();
  return { verdicts, done: progress.done };
}
