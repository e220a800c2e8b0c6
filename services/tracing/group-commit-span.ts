import { context, trace, SpanKind, SpanStatusCode, type Context } from "@opentelemetry/api";
import { ATTR, tracer, tracingEnabled } from "./tracer.js";

/**
 * One SQLite group commit as the worker thread reports it with its replies
 * (storage/sqlite-worker.ts): the transaction's start (just before `BEGIN
 * IMMEDIATE`) and end (after `COMMIT` and its fsync returned, or the
 * rollback), in epoch milliseconds with sub-millisecond precision, and how
 * many writes it held.
 */
export interface GroupCommitReport {
  startMs: number;
  endMs: number;
  size: number;
}

/**
 * The context a write made now should put its group-commit span under: the
 * active one when tracing is on and a span is active (the store span of a
 * traced RPC), else undefined (nothing will be recorded).
 */
export function groupCommitParent(): Context | undefined {
  if (!tracingEnabled()) return undefined;
  const active = context.active();
  return trace.getSpan(active)?.isRecording() === true ? active : undefined;
}

/**
 * Records the group commit a write took part in as a child span `SQLite group
 * commit` of `parent` (issue 14, deliverable 5), spanning the whole shared
 * transaction (every write of the batch gets its own span with the same times),
 * with `mecatl.group_commit.size`. A write that failed gets status ERROR and
 * its SQLite error code in `error.type`.
 *
 * @param sqliteCode the write's SQLite error code when it failed (e.g. `SQLITE_FULL`), else undefined.
 */
export function recordGroupCommit(parent: Context, commit: GroupCommitReport, failed: boolean, sqliteCode?: string): void {
  const span = tracer().startSpan(
    "SQLite group commit",
    { kind: SpanKind.INTERNAL, startTime: commit.startMs, attributes: { [ATTR.backend]: "sqlite", [ATTR.dbSystem]: "sqlite", [ATTR.groupCommitSize]: commit.size } },
    parent,
  );
  if (failed) {
    span.setAttribute(ATTR.errorType, sqliteCode ?? "unknown");
    span.setStatus({ code: SpanStatusCode.ERROR });
  }
  span.end(commit.endMs);
}
