import type { KindFormat } from "../storage/copy/kind-store.js";

/**
 * A lease record as `mecatl-drivers copy` moves it (issue 14): the current
 * hold, if any (owner, token, expiry in microseconds since the epoch), and
 * the token high-water mark, which the copy keeps so that tokens never go
 * backwards on the new store (wire-contract.md section 4.3). Tokens and times
 * are unsigned decimal strings (uint64 is exact that way).
 */
export interface LeaseCopy {
  sessionId: string;
  hold: { owner: string; token: string; expiryUs: string } | undefined;
  highWater: string;
}

/** Copy format of lease records: one per session id ever leased; every field in the digest. */
export const leaseCopyFormat: KindFormat<LeaseCopy> = {
  kind: "leases",
  id: (l) => l.sessionId,
  label: (id) => id,
  count: () => 1,
  bytes: () => 0,
  items: (l) => [[l.sessionId, l.hold?.owner, l.hold?.token, l.hold?.expiryUs, l.highWater]],
};
