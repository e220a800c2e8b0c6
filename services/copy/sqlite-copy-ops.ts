import { sessionCopyOps } from "../session-store/sqlite-copy-ops.js";
import { eventLogCopyOps } from "../event-log/sqlite-copy-ops.js";
import { leaseCopyOps } from "../session-lease/sqlite-copy-ops.js";
import { scheduleCopyOps } from "../schedule-store/sqlite-copy-ops.js";
import { copyProgressOps } from "../storage/copy/sqlite-progress-ops.js";

/**
 * Every SQLite worker operation of `mecatl-drivers copy` (issue 14): each
 * service's export/import operations and the copy's progress record, added
 * to the worker's registry (storage/sqlite-registry.ts).
 */
export const sqliteCopyOps = { ...sessionCopyOps, ...eventLogCopyOps, ...leaseCopyOps, ...scheduleCopyOps, ...copyProgressOps };
