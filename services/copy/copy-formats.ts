import type { CopyKind, KindFormat } from "../storage/copy/kind-store.js";
import { lineageCopyFormat, sessionCopyFormat } from "../session-store/copy-format.js";
import { eventLogCopyFormat } from "../event-log/copy-format.js";
import { leaseCopyFormat } from "../session-lease/copy-format.js";
import { fireCopyFormat, scheduleCopyFormat } from "../schedule-store/copy-format.js";

/** The backend-neutral format of each kind (issue 14), from the service that owns it. */
export const COPY_FORMATS: { [K in CopyKind]: KindFormat<any> } = {
  sessions: sessionCopyFormat,
  lineage: lineageCopyFormat,
  events: eventLogCopyFormat,
  leases: leaseCopyFormat,
  schedules: scheduleCopyFormat,
  fires: fireCopyFormat,
};

/**
 * Ids per read call, per kind: few sessions at a time (a snapshot may be
 * 64 MiB), a few logs (each read answers up to about 1 MiB of one log), and
 * many of the small kinds.
 */
export const READ_GROUP: { [K in CopyKind]: number } = { sessions: 4, lineage: 256, events: 16, leases: 256, schedules: 256, fires: 256 };

/** Read calls a copy keeps in flight ahead of the one it is consuming. */
export const READS_IN_FLIGHT = 4;
