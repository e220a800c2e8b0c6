/**
 * The unary and streaming methods of `mecatl.driver.v1` that change nothing
 * in the store (wire-contract.md sections 2–5): their answers may be refused
 * for lack of in-flight budget after they ran (inflight-budget.ts
 * `takeAnswer`), since the caller can retry them without effect. Every other
 * method is a write, whose answer is never refused once it ran.
 */
const READ_ONLY_METHODS = new Set([
  "Load",
  "List",
  "PageMetadata",
  "ReadLineage",
  "Capabilities",
  "Read",
  "ReadAfter",
  "LoadSchedule",
  "ListSchedules",
  "DueSchedules",
  "LoadFire",
  "ListFires",
  "Check",
  "Watch",
]);

/** True when the method named `name` (its proto name, e.g. "Load") changes nothing in the store. */
export function readOnlyMethod(name: string): boolean {
  return READ_ONLY_METHODS.has(name);
}
