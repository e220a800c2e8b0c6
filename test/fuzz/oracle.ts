/**
 * The status codes each RPC may answer (issue 10, deliverable 5), from
 * wire-contract.md sections 2.5, 3.4-3.7, 4.3, 5.5 and the services'
 * docstrings. Every RPC may answer OK and INVALID_ARGUMENT (bad input), and
 * RESOURCE_EXHAUSTED (a limit of issue 10: message size, bytes in flight);
 * INTERNAL and UNKNOWN are never defined.
 */
import { Code } from "@connectrpc/connect";
import type { DescMethod } from "@bufbuild/protobuf";

/** Codes every RPC may answer. */
const COMMON = [Code.InvalidArgument, Code.ResourceExhausted];

/** Codes besides {@link COMMON}, per `Service/Method` (service without package). */
const EXTRA: Record<string, readonly Code[]> = {
  "SessionStoreService/Save": [],
  "SessionStoreService/Create": [Code.AlreadyExists],
  "SessionStoreService/Load": [Code.NotFound],
  "SessionStoreService/List": [],
  // Optional RPCs (section 2.5): UNIMPLEMENTED while not advertised; ABORTED for a stale cursor once they are.
  "SessionStoreService/PageMetadata": [Code.Unimplemented, Code.Aborted],
  "SessionStoreService/ReadLineage": [Code.Unimplemented, Code.NotFound],
  "SessionStoreService/Delete": [],
  "SessionStoreService/Capabilities": [],
  "EventLogService/Append": [],
  "EventLogService/AppendGap": [],
  "EventLogService/Read": [Code.Aborted],
  "EventLogService/ReadAfter": [Code.FailedPrecondition],
  "SessionLeaseService/Acquire": [Code.FailedPrecondition],
  "SessionLeaseService/Renew": [Code.FailedPrecondition],
  "SessionLeaseService/Release": [],
  // Schedule mutations may answer UNAVAILABLE when Redis commit contention persists (nothing written).
  "ScheduleStoreService/SaveSchedule": [Code.Aborted, Code.Unavailable],
  "ScheduleStoreService/LoadSchedule": [Code.NotFound],
  "ScheduleStoreService/DeleteSchedule": [Code.Aborted, Code.Unavailable],
  "ScheduleStoreService/ListSchedules": [],
  "ScheduleStoreService/DueSchedules": [],
  "ScheduleStoreService/ClaimSchedule": [Code.NotFound, Code.Unavailable],
  "ScheduleStoreService/ClaimScheduleNow": [Code.NotFound, Code.Unavailable],
  "ScheduleStoreService/SetScheduleEnabled": [Code.NotFound, Code.Aborted, Code.Unavailable],
  "ScheduleStoreService/BeginScheduleDelete": [Code.NotFound, Code.FailedPrecondition, Code.Unavailable],
  "ScheduleStoreService/CompleteScheduleDelete": [Code.Aborted, Code.Unavailable],
  "ScheduleStoreService/RecordFire": [Code.NotFound, Code.Unavailable],
  "ScheduleStoreService/RecordFireStart": [Code.NotFound, Code.Unavailable],
  "ScheduleStoreService/RecordFireProgress": [Code.NotFound, Code.Unavailable],
  "ScheduleStoreService/LoadFire": [Code.NotFound],
  "ScheduleStoreService/ListFires": [Code.NotFound],
  "ScheduleOneShotReArmerService/ReArmOneShot": [Code.NotFound, Code.Aborted, Code.Unavailable],
  "Health/Check": [Code.NotFound],
  "Health/Watch": [],
  "Health/List": [],
};

/** `Service/Method` of a method descriptor, the key of the table above. */
export function rpcName(method: DescMethod): string {
  return `${method.parent.name}/${method.name}`;
}

/**
 * The codes `method` may answer besides OK.
 *
 * @throws Error for a method the table does not know (a new RPC needs a row).
 */
export function definedCodes(method: DescMethod): ReadonlySet<Code> {
  const extra = EXTRA[rpcName(method)];
  if (extra === undefined) throw new Error(`no status table for ${rpcName(method)}; add it to test/fuzz/oracle.ts`);
  return new Set([...COMMON, ...extra]);
}

/** Methods whose OK changes the store (the others are reads and never may). */
export function isWrite(method: DescMethod): boolean {
  return !/^(Load|List|Read|Due|Capabilities|PageMetadata|Check|Watch)/.test(method.name) && method.parent.name !== "Health";
}

/**
 * True when an INVALID_ARGUMENT message names what is wrong the way the
 * services do (`field.path: problem`, docs/DESIGN.md principle 7): its first
 * segment is a field of the request, or `request` for bytes that are not a
 * message at all; when `field` is given (the request was damaged in that
 * field only), it must be that field.
 */
export function namesField(method: DescMethod, details: string, field?: string): boolean {
  const m = /^([a-z][a-z0-9_]*)(?:\.[A-Za-z_][A-Za-z0-9_]*)*: /.exec(details);
  if (m === null) return false;
  if (field !== undefined) return m[1] === field;
  return m[1] === "request" || method.input.fields.some((f) => f.name === m[1]);
}
